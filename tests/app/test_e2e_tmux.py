"""End to end: the real ``forkdeck`` command in a real terminal (tmux), on a real workspace.

It types ``/fork``, fills two offline branches whose steers run shell commands, waits for
both ✓ chips, merges branch 1 with ``/merge`` + ``1`` and checks the files on disk, then
``/quit``s and checks the exit status. The offline model needs no network or key.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.tmux import TMUX, Terminal, forkdeck_terminal

pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[tuple[Terminal, Path]]:
    with forkdeck_terminal(tmp_path, "forkdeck-e2e") as term:
        term.start()
        yield term, term.workspace


def test_fork_two_offline_branches_merge_one_and_quit(terminal: tuple[Terminal, Path]) -> None:
    term, workspace = terminal
    term.wait_for(lambda s: "offline (scripted, no LLM)" in s and "workspace " in s, "start-up")
    term.fork_two_rows("!echo a > a.txt", "!echo b > b.txt && rm README.txt")
    term.wait_for(lambda s: "✓ a" in s and "✓ b" in s, "both branches done (✓ chips)")
    # Nothing reached the workspace before the merge.
    assert sorted(p.name for p in workspace.iterdir() if p.name != ".pydantic-deep") == [
        "README.txt"
    ]
    term.type("/merge")
    term.key("Enter")
    term.wait_for(lambda s: "Merge: pick the winning branch" in s, "the merge picker")
    term.key("1")  # chooses and says what will happen (issue 24.14); Enter merges
    term.wait_for(lambda s: "Merge a? " in s, "the merge confirmation")
    term.key("Enter")
    term.wait_for(lambda s: "merged branch a" in s, "the merge notice")
    assert (workspace / "a.txt").read_text() == "a\n"
    assert not (workspace / "b.txt").exists()
    assert (workspace / "README.txt").read_text() == "hello\n"
    term.type("/quit")
    term.key("Enter")
    term.wait_for(lambda s: "FORKDECK-EXIT=0" in s, "a clean exit")


def test_typed_ahead_lines_and_a_bracketed_paste_arrive_whole(
    terminal: tuple[Terminal, Path],
) -> None:
    term, workspace = terminal
    # From the first frame, typically before the model is ready: queued, not refused.
    term.wait_for(lambda s: "Message, /command" in s, "the first frame")
    term.burst("!echo early > early.txt", "Enter")
    term.wait_for(lambda s: "offline (scripted, no LLM)" in s and "workspace " in s, "start-up")
    term.wait_for(lambda _s: (workspace / "early.txt").exists(), "the early line ran")
    # Two lines and a third typed ahead, in one read.
    term.burst("!echo one > one.txt", "Enter", "!echo two > two.txt", "Enter", "!echo thr")
    term.wait_for(lambda _s: (workspace / "two.txt").exists(), "both lines ran")
    assert (workspace / "one.txt").read_text() == "one\n"
    assert (workspace / "two.txt").read_text() == "two\n"
    screen = term.wait_for(lambda s: "!echo thr" in s, "the typed-ahead rest stays in the input")
    assert "one.txt!echo" not in screen
    term.burst("ee > three.txt", "Enter")
    term.wait_for(lambda _s: (workspace / "three.txt").exists(), "the third line ran")
    # A multi-line paste (bracketed: tmux paste-buffer -p) keeps every line; Enter sends.
    term.tmux("set-buffer", "-b", "fd", "write notes.txt\nline one\nline two\nend")
    term.tmux("paste-buffer", "-p", "-b", "fd", "-t", term.name)
    term.wait_for(lambda s: "4 lines" in s, "the composer shows the pasted lines")
    term.key("Enter")
    term.wait_for(lambda _s: (workspace / "notes.txt").exists(), "the write ran")
    assert (workspace / "notes.txt").read_text() == "line one\nline two\n"
    # ctrl+j is a newline that works in every terminal
    term.burst("write more.txt", "C-j", "x", "C-j", "end", "Enter")
    term.wait_for(lambda _s: (workspace / "more.txt").exists(), "the ctrl+j block ran")
    assert (workspace / "more.txt").read_text() == "x\n"
    term.burst("/quit", "Enter")
    term.wait_for(lambda s: "FORKDECK-EXIT=0" in s, "a clean exit")


def test_esc_then_enter_keys_and_jumping_during_a_fork(terminal: tuple[Terminal, Path]) -> None:
    term, workspace = terminal
    term.wait_for(lambda s: "offline (scripted, no LLM)" in s and "workspace " in s, "start-up")
    term.fork_two_rows("!sleep 40", "!sleep 40")
    term.wait_for(lambda s: "● a" in s and "● b" in s, "two running branches")
    # Esc out of habit, then Enter, in one read: the fork is not aborted.
    term.burst("Escape", "Enter")
    time.sleep(1.0)
    screen = term.wait_for(lambda s: "Abort the entire fork?" not in s, "no dialog left open")
    assert "● a" in screen and "● b" in screen and "fork aborted" not in screen
    # The dialog itself defaults to No: Esc, wait for it, Enter.
    term.key("Escape")
    term.wait_for(lambda s: "Abort the entire fork?" in s, "the abort question")
    term.key("Enter")
    screen = term.wait_for(lambda s: "Abort the entire fork?" not in s, "the dialog closed")
    assert "fork aborted" not in screen
    # Esc with text only clears the text.
    term.burst(">>a half a thought", "Escape")
    screen = term.wait_for(lambda s: "half a thought" not in s, "the text cleared")
    time.sleep(1.0)  # an Esc taken for "abort" would show its dialog by now
    assert "Abort the entire fork?" not in term.screen()
    # Jumping: F2, alt+1 (ESC 1 in tmux), ctrl+pagedown.
    term.burst("F2")
    term.wait_for(lambda s: "branch b ·" in s, "F2 shows branch b")
    term.burst("M-1")
    term.wait_for(lambda s: "branch a ·" in s, "alt+1 shows branch a")
    term.burst("C-NPage")
    term.wait_for(lambda s: "branch b ·" in s, "ctrl+pagedown shows the next branch")
    # !cmd on a branch tab runs in that branch, not in the workspace.
    term.burst("!echo trap > trap.txt", "Enter")
    term.wait_for(lambda s: "exit 0, branch b" in s, "the command ran in branch b")
    assert not (workspace / "trap.txt").exists()
    # ctrl+q with running branches asks, Enter keeps running.
    term.key("C-q")
    term.wait_for(lambda s: "still running" in s, "the quit question")
    term.key("Enter")
    screen = term.wait_for(lambda s: "still running" not in s, "the dialog closed")
    assert "FORKDECK-EXIT" not in screen
    term.key("C-q")
    term.wait_for(lambda s: "still running" in s, "the quit question")
    term.key("y")
    term.wait_for(lambda s: "FORKDECK-EXIT=0" in s, "a clean exit")
