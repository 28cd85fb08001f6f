"""End to end: the real ``forkdeck`` command in a real terminal (tmux), on a real workspace.

It types ``/fork``, fills two offline branches whose steers run shell commands, waits for
both ✓ chips, merges branch 1 with ``/merge`` + ``1`` and checks the files on disk, then
``/quit``s and checks the exit status. The offline model needs no network or key.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TMUX = shutil.which("tmux")
KEY_GAP = 0.15

pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")


class Terminal:
    """One detached tmux session on a private server socket."""

    def __init__(self, socket: str, name: str) -> None:
        self.socket = socket
        self.name = name

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            [TMUX or "tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        return done.stdout

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.name)

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", self.name, "-l", text)
        time.sleep(KEY_GAP)

    def key(self, *keys: str) -> None:
        # One key at a time, at typing pace: a key that moves the focus is handled after
        # the keys already queued behind it, so a machine-speed burst is not what a person
        # types (see the report: the picker could bind tab with priority).
        for key in keys:
            self.tmux("send-keys", "-t", self.name, key)
            time.sleep(KEY_GAP)

    def wait_for(self, check: Callable[[str], bool], what: str, timeout: float = 60.0) -> str:
        """Poll the screen until ``check`` holds (the timeout only turns a hang into a failure)."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen()
            if check(text):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"waited for {what}; the screen shows:\n{text}")
            time.sleep(0.2)


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[tuple[Terminal, Path]]:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "README.txt").write_text("hello\n")
    socket = f"forkdeck-e2e-{uuid.uuid4().hex[:8]}"
    term = Terminal(socket, "forkdeck")
    env = {
        "FORKDECK_STORE": os.environ["FORKDECK_STORE"],
        "PYTHONPATH": str(REPO),
        "TERM": "xterm-256color",
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
    }
    exports = " ".join(f"{k}='{v}'" for k, v in env.items())
    command = (
        f"cd '{workspace}' && env -i {exports} '{sys.executable}' -m app.entry . ; "
        "echo FORKDECK-EXIT=$?; sleep 60"
    )
    term.tmux("new-session", "-d", "-s", term.name, "-x", "160", "-y", "48", command)
    try:
        yield term, workspace
    finally:
        term.tmux("kill-server")


def test_fork_two_offline_branches_merge_one_and_quit(terminal: tuple[Terminal, Path]) -> None:
    term, workspace = terminal
    term.wait_for(lambda s: "offline (scripted, no LLM)" in s and "workspace " in s, "start-up")
    term.type("/fork")
    term.key("Enter")
    term.wait_for(lambda s: "Fork into 2 branches" in s, "the fork picker")
    # Focus starts on row 1's label; Tab walks label -> steer -> model -> budget -> next row.
    term.key("Tab")
    term.type("!echo a > a.txt")
    term.key("Tab", "Tab", "Tab", "Tab")
    term.type("!echo b > b.txt && rm README.txt")
    term.key("C-s")
    term.wait_for(lambda s: "✓ a" in s and "✓ b" in s, "both branches done (✓ chips)")
    # Nothing reached the workspace before the merge.
    assert sorted(p.name for p in workspace.iterdir() if p.name != ".pydantic-deep") == [
        "README.txt"
    ]
    term.type("/merge")
    term.key("Enter")
    term.wait_for(lambda s: "Merge: pick the winning branch" in s, "the merge picker")
    term.key("1")
    term.wait_for(lambda s: "merged branch a" in s, "the merge notice")
    assert (workspace / "a.txt").read_text() == "a\n"
    assert not (workspace / "b.txt").exists()
    assert (workspace / "README.txt").read_text() == "hello\n"
    term.type("/quit")
    term.key("Enter")
    term.wait_for(lambda s: "FORKDECK-EXIT=0" in s, "a clean exit")
