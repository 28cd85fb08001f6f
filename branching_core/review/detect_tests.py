"""Find a project's test command by itself, when ``[review] test_command`` is not set.

Why: the judge's strongest signal is the branches' test results, and most users never set
a test command. The workspace usually says how it is tested; we read only marker files
(no command is run to detect), in this order, first match wins:

1. pytest: ``pytest.ini``, ``pyproject.toml`` with ``[tool.pytest.ini_options]``,
   ``tox.ini`` with ``[pytest]``, ``setup.cfg`` with ``[tool:pytest]``, or a Python project
   (``pyproject.toml``/``setup.py``) with a ``tests``/``test`` directory or ``test_*.py``;
2. ``package.json`` with ``scripts.test`` (not npm's placeholder): ``npm``/``pnpm``/``yarn``/
   ``bun`` chosen by the lock file; jest gets ``--json --outputFile`` so counts are exact;
3. ``Cargo.toml``: ``cargo test --no-fail-fast`` (every test binary runs, each prints its
   summary line);
4. ``go.mod``: ``go test -json ./...``;
5. a ``Makefile`` with a ``test:`` target: ``make test``;
6. plain Python test files with no configuration at all (``test_*.py`` or ``*_test.py`` at
   the top or in ``tests/``/``test/``): pytest, which collects exactly those names.

``kind`` tells ``branch_tests`` which machine output to expect; ``source`` says which file
decided (shown in the merge picker and ``/fork diff``).
"""

from __future__ import annotations

import configparser
import json
import re
import shutil
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

TestKind = Literal["pytest", "node", "jest", "cargo", "go", "make", "configured"]

JSON_REPORT_PATH = "/tmp/forkdeck-report.json"
"""Inside the sandbox: where jest writes its ``--json`` report (read back on fd 4)."""

_NPM_PLACEHOLDER = 'echo "Error: no test specified"'
_MAKE_TEST = re.compile(r"^test\s*:(?!=)", re.MULTILINE)


@dataclass(frozen=True)
class DetectedTestCommand:
    """A test command and where it came from (``source``: a file name, or ``config``)."""

    command: str
    source: str
    kind: TestKind

    def describe(self) -> str:
        """One line for a UI: ``pytest -q (from pyproject.toml)``."""
        return f"{self.command} (from {self.source})"


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None
    except OSError:
        return None


def _pytest_command(root: Path) -> str:
    for venv in (".venv", "venv"):
        if (root / venv / "bin" / "python").exists():
            return f"{venv}/bin/python -m pytest -q"
    return "pytest -q" if shutil.which("pytest") else "python3 -m pytest -q"


def _ini_has(text: str | None, section: str) -> bool:
    if text is None:
        return False
    parser = configparser.ConfigParser(interpolation=None, strict=False)
    try:
        parser.read_string(text)
    except configparser.Error:
        return f"[{section}]" in text
    return parser.has_section(section)


def _pytest_source(root: Path) -> str | None:
    if (root / "pytest.ini").is_file():
        return "pytest.ini"
    pyproject = _read(root / "pyproject.toml")
    doc: dict[str, object] = {}
    if pyproject is not None:
        try:
            doc = tomllib.loads(pyproject)
        except tomllib.TOMLDecodeError:
            doc = {}
        tool = doc.get("tool")
        if isinstance(tool, dict) and isinstance(tool.get("pytest"), dict):
            return "pyproject.toml"
    if _ini_has(_read(root / "tox.ini"), "pytest"):
        return "tox.ini"
    if _ini_has(_read(root / "setup.cfg"), "tool:pytest"):
        return "setup.cfg"
    marker = "pyproject.toml" if pyproject is not None else None
    if marker is None and (root / "setup.py").is_file():
        marker = "setup.py"
    if marker is not None and (
        (root / "tests").is_dir() or (root / "test").is_dir() or any(root.glob("test_*.py"))
    ):
        return marker
    return None


def _node(root: Path) -> DetectedTestCommand | None:
    text = _read(root / "package.json")
    if text is None:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    scripts = doc.get("scripts") if isinstance(doc, dict) else None
    script = scripts.get("test") if isinstance(scripts, dict) else None
    if not isinstance(script, str) or not script.strip() or _NPM_PLACEHOLDER in script:
        return None
    manager = "npm"
    for lock, name in (
        ("pnpm-lock.yaml", "pnpm"),
        ("yarn.lock", "yarn"),
        ("bun.lockb", "bun"),
        ("bun.lock", "bun"),
    ):
        if (root / lock).is_file():
            manager = name
            break
    run = "npm test" if manager == "npm" else f"{manager} test"
    if re.search(r"(^|[\s/])jest(\s|$)", script):
        sep = " --" if manager == "npm" else ""
        return DetectedTestCommand(
            f"{run}{sep} --json --outputFile={JSON_REPORT_PATH}", "package.json", "jest"
        )
    return DetectedTestCommand(run, "package.json", "node")


def detect_test_command(path: Path | str) -> DetectedTestCommand | None:
    """The test command of the project at ``path`` (order in the module docstring), or
    ``None`` when nothing says how it is tested. Reads files only; never raises for an
    unreadable or malformed marker file (it is skipped)."""
    root = Path(path)
    source = _pytest_source(root)
    if source is not None:
        return DetectedTestCommand(_pytest_command(root), source, "pytest")
    node = _node(root)
    if node is not None:
        return node
    if (root / "Cargo.toml").is_file():
        return DetectedTestCommand("cargo test --no-fail-fast", "Cargo.toml", "cargo")
    if (root / "go.mod").is_file():
        return DetectedTestCommand("go test -json ./...", "go.mod", "go")
    for name in ("Makefile", "makefile", "GNUmakefile"):
        text = _read(root / name)
        if text is not None and _MAKE_TEST.search(text):
            return DetectedTestCommand("make test", name, "make")
    plain = _plain_test_file(root)
    if plain is not None:
        return DetectedTestCommand(_pytest_command(root), plain, "pytest")
    return None


_PLAIN_TEST_GLOBS = ("test_*.py", "*_test.py")


def _plain_test_file(root: Path) -> str | None:
    """The first ``test_*.py``/``*_test.py`` (relative) at the top or in ``tests/``/``test/``:
    a project of a module and its test file has no marker file, and said "none detected"
    beside its ``test_calc.py``. Only these three directories are read (never a walk)."""
    for folder in (root, root / "tests", root / "test"):
        if not folder.is_dir():
            continue
        found = sorted(
            path for pattern in _PLAIN_TEST_GLOBS for path in folder.glob(pattern) if path.is_file()
        )
        if found:
            return found[0].relative_to(root).as_posix()
    return None


def choose_test_command(
    configured: str | None, path: Path | str | None
) -> DetectedTestCommand | None:
    """``configured`` (``[review] test_command`` or an explicit argument) wins; otherwise
    the detected command of the project at ``path``."""
    if configured and configured.strip():
        return DetectedTestCommand(configured.strip(), "config", "configured")
    return detect_test_command(path) if path is not None else None


__all__ = [
    "JSON_REPORT_PATH",
    "DetectedTestCommand",
    "TestKind",
    "choose_test_command",
    "detect_test_command",
]
