"""The README's and the documentation's examples keep working (issue 24.17).

Every ```python block in README.md and docs/*.md is compiled and every name it imports from
forkdeck exists; a block is also **run as written** (a fresh interpreter in an empty
directory, no API keys in its environment) unless the line before its fence marks it:

    <!-- example: compile-only (why: needs an API key, a fragment of a longer session...) -->
    <!-- example: run as root (why: cgroup limits) -->

so a reader who copies an example gets one that works, and one that cannot run here says
why. Every `forkdeck SUBCOMMAND` the pages show is a real subcommand.

Why: renames and moves are easy to finish in the code and forget in the docs, and a reader
copies the docs first.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^(?P<indent>[ ]*)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```",
                   re.S | re.M)
MARKER = re.compile(r"^\s*<!-- example: (?P<mode>compile-only|run as root) \((?P<why>[^)]+)\) -->$")
ANY_MARKER = re.compile(r"<!-- example:")
# Commands other front doors add (issue 24's siblings); shown in the README's quickstart
# before their branches land. Delete a name here once its subcommand exists.
ANNOUNCED_COMMANDS: set[str] = set()  # each announced command has landed
# Shown on purpose as what a user mistypes (the CLI page's "did you mean").
DELIBERATE_TYPOS = {"stauts"}
# An example must not reach a provider: these are removed from its environment.
KEY_VARIABLES = ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY",
                 "GROQ_API_KEY", "MISTRAL_API_KEY", "OPENROUTER_API_KEY", "OLLAMA_BASE_URL",
                 "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "FORKDECK_API_KEY")


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    code: str
    mode: str  # "run", "compile-only" or "run as root"
    why: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def _blocks(page: Path) -> list[Block]:
    text = page.read_text()
    found = []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = MARKER.match(before)
        found.append(Block(
            page=page, line=text.count("\n", 0, match.start()) + 1, lang=match.group("lang"),
            code=textwrap.dedent(match.group("body")),
            mode=marker.group("mode") if marker else "run",
            why=marker.group("why") if marker else "",
        ))
    return found


BLOCKS = [b for page in PAGES for b in _blocks(page)]
PYTHON = [b for b in BLOCKS if b.lang == "python"]
RUNNABLE = [b for b in PYTHON if b.mode != "compile-only"]


def test_the_pages_have_python_examples_and_most_run() -> None:
    assert len(PYTHON) >= 10
    assert len(RUNNABLE) >= 5
    assert any(b.page.name == "forking.md" for b in RUNNABLE), "fork from Python must run"


def test_every_marker_is_well_formed_and_sits_on_a_python_block() -> None:
    for page in PAGES:
        lines = page.read_text().splitlines()
        fence = False
        for n, line in enumerate(lines):
            if line.lstrip().startswith("```"):
                fence = not fence
            if ANY_MARKER.search(line) and not fence:  # (a page may show one in a block)
                assert MARKER.match(line), f"{page.name}:{n + 1}: malformed marker {line!r}"
                following = lines[n + 1].strip() if n + 1 < len(lines) else ""
                assert following.startswith("```python"), f"{page.name}:{n + 1}: marker on no block"


@pytest.mark.parametrize("block", PYTHON, ids=[b.where for b in PYTHON])
def test_every_python_block_compiles_and_its_forkdeck_imports_exist(block: Block) -> None:
    tree = compile(block.code, block.where, "exec",
                   flags=ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    assert isinstance(tree, ast.Module)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            ("branching_core", "forkdeck")
        ):
            module = importlib.import_module(node.module or "")
            missing = [a.name for a in node.names if not hasattr(module, a.name)]
            assert not missing, f"{block.where}: {node.module} has no {missing}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(("branching_core", "forkdeck")):
                    importlib.import_module(alias.name)


@pytest.mark.parametrize("block", RUNNABLE, ids=[b.where for b in RUNNABLE])
def test_every_runnable_python_block_runs_as_written(block: Block, tmp_path: Path) -> None:
    if block.mode == "run as root" and os.geteuid() != 0:
        pytest.skip(f"{block.where} runs as root only ({block.why})")
    compile(block.code, block.where, "exec")  # a runnable block has no top-level await
    env = {k: v for k, v in os.environ.items() if k not in KEY_VARIABLES}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.run([sys.executable, "-c", block.code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=240, check=False)
    assert proc.returncode == 0, f"{block.where} failed:\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr


def _known_subcommands() -> set[str]:
    from forkdeck.entry import HEADLESS_COMMANDS
    from forkdeck.subcommands import EXTRA_HELP

    from branching_core.cli import build_parser

    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return set(action.choices) | set(HEADLESS_COMMANDS) | set(EXTRA_HELP)
    raise AssertionError("the CLI has no subcommands")


def test_every_forkdeck_subcommand_the_pages_show_exists() -> None:
    shown: set[tuple[str, str]] = set()
    for block in BLOCKS:
        for offset, text in enumerate(block.code.splitlines()):
            for word in re.findall(r"(?:^|[\s$`(])forkdeck ([a-z][a-z-]*)\b(?!:)", text):
                shown.add((f"{block.page.name}:{block.line + 1 + offset}", word))
    for page in PAGES:
        text = page.read_text()
        for match in re.finditer(r"`forkdeck ([a-z][a-z-]*)", text):
            shown.add((f"{page.name}:{text.count(chr(10), 0, match.start()) + 1}", match.group(1)))
    assert {word for _, word in shown} >= {"run", "best-of-n", "models", "status"}
    known = _known_subcommands() | ANNOUNCED_COMMANDS | DELIBERATE_TYPOS
    unknown = sorted((where, word) for where, word in shown if word not in known)
    assert unknown == [], f"the docs show subcommands forkdeck does not have: {unknown}"
