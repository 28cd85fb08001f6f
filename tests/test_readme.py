"""The README's examples keep working: every Python block compiles, every name it imports
from forkdeck exists, and every `forkdeck SUBCOMMAND` it shows is a real subcommand.

Why: renames (issue 15's vocabulary) and moves (sub-agents to ``branching_core.live``) are
easy to finish in the code and forget in the README, and a reader copies the README first.
The blocks are fragments (``...``, names defined by the reader), so they are compiled and
their imports resolved rather than run; what they do is covered by the tests of each part.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def _blocks(language: str | None = None) -> list[tuple[int, str]]:
    text = README.read_text()
    found = []
    for match in FENCE.finditer(text):
        if language is None or match.group(1) == language:
            found.append((text.count("\n", 0, match.start()) + 1, match.group(2)))
    return found


PYTHON_BLOCKS = _blocks("python")


def test_the_readme_has_python_examples() -> None:
    assert len(PYTHON_BLOCKS) >= 10


@pytest.mark.parametrize(
    ("line", "code"), PYTHON_BLOCKS, ids=[f"line{n}" for n, _ in PYTHON_BLOCKS]
)
def test_every_python_block_compiles_and_its_forkdeck_imports_exist(line: int, code: str) -> None:
    tree = compile(code, f"README.md:{line}", "exec",
                   flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    assert isinstance(tree, ast.Module)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            ("branching_core", "forkdeck")
        ):
            module = importlib.import_module(node.module or "")
            missing = [a.name for a in node.names if not hasattr(module, a.name)]
            assert not missing, f"README.md:{line}: {node.module} has no {missing}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(("branching_core", "forkdeck")):
                    importlib.import_module(alias.name)


def _subcommands() -> set[str]:
    from branching_core.cli import build_parser

    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return set(action.choices)
    raise AssertionError("the CLI has no subcommands")


def test_every_forkdeck_subcommand_the_readme_shows_exists() -> None:
    shown: set[tuple[int, str]] = set()
    for line, code in _blocks():
        for offset, text in enumerate(code.splitlines()):
            for word in re.findall(r"(?:^|[\s$`(])forkdeck ([a-z][a-z-]*)\b", text):
                shown.add((line + 1 + offset, word))
    text = README.read_text()
    for match in re.finditer(r"`forkdeck ([a-z][a-z-]*)", text):
        shown.add((text.count("\n", 0, match.start()) + 1, match.group(1)))
    assert {word for _, word in shown} >= {"run", "best-of-n", "models", "status"}
    known = _subcommands()
    unknown = sorted((line, word) for line, word in shown if word not in known)
    assert unknown == [], f"README shows subcommands forkdeck does not have: {unknown}"
