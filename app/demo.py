"""``forkdeck demo [PATH]``: forkdeck's point in one minute, with no model and no key.

Why: a newcomer on the offline model met an echo and a refused ``/fork``; nothing showed
what forking a live run is for. The demo makes a throwaway project with a failing test
(``calc.py`` and ``test_calc.py``, in a new temporary directory or the new/empty ``PATH``),
opens the TUI on it with the offline model, and plays a short script through the real
machinery: a parent turn reads the code and runs the tests (they fail), a fork of three
approaches runs (each branch really writes ``calc.py`` and runs the tests with the real
tools in its own copy-on-write branch sandbox; exactly one passes), and the merge picker
opens with every branch's test result. Picking a branch (a digit, then Enter) lands its fix
in the project; the user can keep chatting, forking and merging there.
"""

from __future__ import annotations

import argparse
import importlib.util
import shlex
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .fork.ports import ForkHost
from .forkdeck_app import ForkdeckApp
from .session import ChatSession

CALC = '''\
"""A tiny module with a bug: mean() divides by one too many."""


def mean(values):
    """The arithmetic mean of a non-empty list of numbers."""
    return sum(values) / (len(values) + 1)
'''

TEST_CALC = '''\
import unittest

from calc import mean


class MeanTest(unittest.TestCase):
    def test_two_numbers(self):
        self.assertEqual(mean([2, 4]), 3)

    def test_one_number(self):
        self.assertEqual(mean([5]), 5)

    def test_empty_is_an_error(self):
        with self.assertRaises(ValueError):
            mean([])


if __name__ == "__main__":
    unittest.main()
'''


@dataclass(frozen=True)
class Approach:
    """One branch of the demo's fork: its label, what it tries, and the new ``calc.py``."""

    label: str
    idea: str
    body: str


APPROACHES = (
    Approach(
        "divide",
        "divide by len(values)",
        "    return sum(values) / len(values)\n",
    ),
    Approach(
        "guard",
        "refuse an empty list, then divide by len(values)",
        "    if not values:\n"
        '        raise ValueError("mean() of an empty list")\n'
        "    return sum(values) / len(values)\n",
    ),
    Approach(
        "clamp",
        "divide by at least 1",
        "    return sum(values) / max(len(values), 1)\n",
    ),
)
"""Exactly one passes every test (``guard``): the others fail one test each, differently."""

FIRST_TURN = "read calc.py\n!{tests}"
"""The parent turn: the offline model reads the module and runs the tests (they fail)."""


def test_command() -> str:
    """pytest when this Python has it (counts in the merge picker), else stdlib unittest.
    This interpreter, by absolute path: the branch sandboxes see the host's files."""
    python = shlex.quote(sys.executable)
    if importlib.util.find_spec("pytest") is not None:
        return f"{python} -m pytest -q -p no:cacheprovider"
    return f"{python} -m unittest"


def make_project(path: Path | None = None) -> Path:
    """Write the demo project into ``path`` (new or empty) or a new temporary directory.

    Raises ``ValueError`` (one line) for a ``path`` that holds anything: the demo never
    writes over a user's files."""
    if path is None:
        root = Path(tempfile.mkdtemp(prefix="forkdeck-demo-"))
    else:
        root = path.expanduser()
        if root.exists() and (not root.is_dir() or any(root.iterdir())):
            raise ValueError(f"{root} is not a new or empty directory; the demo needs one")
        root.mkdir(parents=True, exist_ok=True)
    root = root.resolve()
    (root / "calc.py").write_text(CALC)
    (root / "test_calc.py").write_text(TEST_CALC)
    config = root / ".pydantic-deep" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(
        "# written by `forkdeck demo`\n"
        "[review]\n"
        f"test_command = {_toml_string(test_command())}\n"
        "[fork]\n"
        f"branches = {len(APPROACHES)}\n"
    )
    return root


def _toml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def steer_for(approach: Approach, tests: str) -> str:
    """The offline script of one branch: write its ``calc.py``, then run the tests."""
    head = CALC.split("    return", 1)[0]
    return f"write calc.py\n{head}{approach.body}end\n!{tests}"


def branch_specs(tests: str) -> list[Any]:
    from branching_core.fork import BranchSpec

    return [BranchSpec(label=a.label, steer=steer_for(a, tests)) for a in APPROACHES]


class DemoApp(ForkdeckApp):
    """The normal TUI, which plays the demo's script once the session is ready."""

    demo_done: bool = False
    """Set when the merge picker has been opened (tests wait on it)."""

    async def _prepare(self) -> None:
        await super()._prepare()
        if self.session.ready and self.chat is not None:
            self.run_worker(self._play(self.chat), name="demo", group="demo")

    async def _play(self, screen: DemoHost) -> None:
        if await play(screen):
            self.demo_done = True


class DemoHost(ForkHost, Protocol):
    """The screen the demo plays on: a fork's flows, and a line typed as if by the user."""

    def handle_line(self, text: str) -> None: ...


async def play(screen: DemoHost) -> bool:
    """The demo's script on the real session (see the module docstring); True once the
    merge picker is asked for (False: the fork failed, and the chat says why)."""
    from .merge.screen_flow import start_merge

    session = screen.session
    tests = session.settings.test_command or test_command()
    screen.notice(
        "demo: calc.py has a bug and its test fails. The offline model reads it and runs "
        "the tests; then a fork tries three fixes at once, each in its own copy of the files."
    )
    screen.handle_line(FIRST_TURN.format(tests=tests))
    await _until(lambda: not screen.turn_running and bool(session.history))
    ideas = "; ".join(f"{a.label}: {a.idea}" for a in APPROACHES)
    screen.notice(f"demo: forking {len(APPROACHES)} approaches ({ideas})")
    try:
        coordinator = await session.start_fork(branch_specs(tests), None)
    except Exception as exc:
        screen.notice(f"demo: the fork failed: {exc}", "error")
        return False
    await screen.fork_view.open(coordinator)
    await coordinator.wait()
    screen.notice(
        "demo: every branch ran the tests; the merge picker shows each result. Press the "
        "digit of the branch to merge, then Enter (Esc keeps the fork open: /merge later)."
    )
    start_merge(screen)
    return True


async def _until(predicate: Any, step: float = 0.05) -> None:
    import asyncio

    while not predicate():
        await asyncio.sleep(step)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="forkdeck demo",
        description=(
            "Make a throwaway project with a failing test and watch a fork of three fixes on "
            "the offline model (no LLM, no key): each branch edits the code and runs the "
            "tests; the merge picker shows which passed."
        ),
    )
    parser.add_argument(
        "path", nargs="?", help="a new or empty directory for the project (default: a temp dir)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        root = make_project(Path(args.path) if args.path else None)
    except (ValueError, OSError) as exc:
        print(f"forkdeck demo: {exc}", file=sys.stderr)
        return 2
    session = ChatSession(root, requested_model="offline")
    DemoApp(session).run()
    print(f"forkdeck demo: the project is at {root} (open it again with: forkdeck {root})")
    return 0


__all__ = ["APPROACHES", "DemoApp", "branch_specs", "main", "make_project", "play", "steer_for"]
