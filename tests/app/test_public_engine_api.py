"""The app reaches the engine only through its public modules (issue 23).

``lint-imports`` enforces the rule ("The app uses only the engine's public modules" in
pyproject.toml); these tests keep the rule whole and the exports honest: every top-level
helper module is in the contract's list, every name the app imports from a layer package
is one the package declares, every lazy export resolves, and the start-up path still
loads no layer beyond the settings.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / "branching_core"
CONTRACT = "The app uses only the engine's public modules"


def _contract() -> dict:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    return next(c for c in contracts if c["name"] == CONTRACT)


def _engine_imports() -> list[tuple[str, int, str, list[str]]]:
    """``(file, line, module, names)`` of every ``from branching_core... import`` in app/."""
    found = []
    for path in sorted((ROOT / "app").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "branching_core"
            ):
                found.append((str(path.relative_to(ROOT)), node.lineno, node.module or "",
                              [a.name for a in node.names]))
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("branching_core"):
                        found.append((str(path.relative_to(ROOT)), node.lineno, alias.name, []))
    return found


def test_every_top_level_helper_module_is_forbidden_to_the_app() -> None:
    """A new ``branching_core/<name>.py`` is private until listed: the contract must name it,
    or the app could import it unchecked (layer packages are covered by ``branching_core.*.*``)."""
    contract = _contract()
    assert contract["source_modules"] == ["forkdeck"]
    assert "branching_core.*.*" in contract["forbidden_modules"]
    helpers = {f"branching_core.{p.stem}" for p in ENGINE.glob("*.py") if p.stem != "__init__"}
    missing = helpers - set(contract["forbidden_modules"])
    assert not missing, f"add to the contract's forbidden_modules: {sorted(missing)}"


def test_the_app_imports_only_the_root_and_layer_packages() -> None:
    layers = {p.parent.name for p in ENGINE.glob("*/__init__.py")}
    public = {"branching_core"} | {f"branching_core.{name}" for name in layers}
    private = [(f, line, m) for f, line, m, _ in _engine_imports() if m not in public]
    assert private == []
    assert len(_engine_imports()) > 40  # the scan sees the app's imports at all


def test_every_name_the_app_imports_is_declared_and_resolves() -> None:
    """Each name is in its package's ``__all__`` (so it is an export, not an accident of what
    the ``__init__`` happens to import) and loads (a lazy table entry with a typo fails)."""
    wrong = []
    for file, line, module, names in _engine_imports():
        package = importlib.import_module(module)
        for name in names:
            if (ENGINE / name / "__init__.py").exists() and module == "branching_core":
                continue  # ``from branching_core import fork``: a layer package itself
            if name not in package.__all__ or getattr(package, name, None) is None:
                wrong.append(f"{file}:{line}: {module}.{name}")
    assert wrong == []


def test_every_lazy_export_of_a_layer_package_resolves() -> None:
    for module in ("branching_core", "branching_core.fork", "branching_core.review",
                   "branching_core.live", "branching_core.external", "branching_core.sandbox"):
        package = importlib.import_module(module)
        lazy = package._LAZY
        assert lazy, module
        for name in lazy:
            assert name in package.__all__, f"{module}.{name} not in __all__"
            assert getattr(package, name) is not None, f"{module}.{name}"


def test_start_up_still_loads_no_engine_layer_beyond_settings() -> None:
    """The public imports kept lazy imports lazy: opening the chat screen's modules loads
    neither pydantic-ai nor the fork, agent, review or workspace layers."""
    script = (
        "import sys\n"
        "import forkdeck.tui, forkdeck.forkdeck_app, forkdeck.session, forkdeck.chat.screen\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith(('branching_core', "
        "'pydantic_ai')))))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True, cwd=ROOT).stdout.split()
    layers = {m.split(".")[1] for m in out if m.count(".") >= 1}
    assert "pydantic_ai" not in out
    assert layers <= {"_lazy", "atomicio", "config", "errors", "state_dir", "toml_salvage"}, out


def test_a_layer_package_types_every_lazy_export() -> None:
    """A lazy name is also imported under ``if TYPE_CHECKING:`` so that pyright sees its real
    type, not ``__getattr__``'s (the app's type checking goes through these packages)."""
    not_typed = {
        # the review package re-exports the fork layer's mirror: a type import of a layer above
        # would break the layers contract
        ("branching_core.review", "ForkMaterializer"),
        ("branching_core.review", "recover_mirrors"),
    }
    for layer in ("fork", "review", "live", "external", "sandbox"):
        module = f"branching_core.{layer}"
        tree = ast.parse((ENGINE / layer / "__init__.py").read_text())
        typed = {
            alias.asname or alias.name
            for node in tree.body
            if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
            for sub in node.body
            if isinstance(sub, ast.ImportFrom)
            for alias in sub.names
        }
        lazy = set(importlib.import_module(module)._LAZY)
        missing = {name for name in lazy - typed if (module, name) not in not_typed}
        assert not missing, f"{module}: add to its TYPE_CHECKING imports: {sorted(missing)}"
