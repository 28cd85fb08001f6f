"""End to end through a real terminal (tmux): the fork's diff tool and crash recovery.

The real ``forkdeck`` command runs in a detached tmux session on a private server socket,
on the offline model (no network, no key); keys are sent with ``send-keys`` as a person
types them. Checked: ``o`` in the merge picker hands the diff tool paths inside the fork's
live mirror (issue 13.6), and a fork whose process was SIGKILLed can be reopened (tabs,
recovered transcripts) and merged at the next start (issue 13.7).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.tmux import TMUX, Terminal, forkdeck_terminal

pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not installed")


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Terminal]:
    with forkdeck_terminal(tmp_path, "tui-fork-e2e") as term:
        yield term


def fork_two(term: Terminal, steer_a: str, steer_b: str) -> None:
    """``/fork`` with two rows whose steers are typed into the picker; wait for both ✓."""
    term.wait_for(lambda s: "offline (scripted, no LLM)" in s and "workspace " in s, "start-up")
    term.fork_two_rows(steer_a, steer_b)
    term.wait_for(lambda s: "✓ a" in s and "✓ b" in s, "both branches done (✓ chips)")


def test_o_in_the_merge_picker_hands_the_tool_the_forks_mirror(
    terminal: Terminal, tmp_path: Path
) -> None:
    out = tmp_path / "difftool-argv.json"
    script = tmp_path / "record.py"
    script.write_text(
        f"import json, sys\nopen({str(out)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
    )
    terminal.env["FORKDECK_DIFFTOOL"] = f"{sys.executable} {script} {{parent}} {{branches}}"
    terminal.start()
    fork_two(terminal, "!echo one >> README.txt", "!echo b > b.txt")
    terminal.type("/merge")
    terminal.key("Enter")
    terminal.wait_for(lambda s: "Merge: pick the winning branch" in s, "the merge picker")
    terminal.key("Right", "o")
    terminal.wait_for(lambda s: out.exists(), "the diff tool to run", timeout=20)
    argv = json.loads(out.read_text().splitlines()[-1])
    forks = terminal.workspace / ".pydantic-deep" / "forks"
    (fork_dir,) = list(forks.iterdir())
    assert argv == [str(fork_dir / "parent"), str(fork_dir / "branches" / "b")]
    assert (fork_dir / "branches" / "b" / "b.txt").read_text() == "b\n"
    assert not (fork_dir / "parent" / "b.txt").exists()
    terminal.key("2", "2")  # choose b, then the same digit again confirms (issue 24.14)
    terminal.wait_for(lambda s: "merged branch b" in s, "the merge notice")
    assert (terminal.workspace / "b.txt").read_text() == "b\n"
    assert (terminal.workspace / "README.txt").read_text() == "hello\n"
    terminal.type("/quit")
    terminal.key("Enter")
    terminal.wait_for(lambda s: "FORKDECK-EXIT=0" in s, "a clean exit")


def test_kill_9_then_reopen_the_fork_and_merge(terminal: Terminal) -> None:
    terminal.start()
    fork_two(terminal, "!echo a > a.txt", "!echo b > b.txt")
    os.kill(terminal.app_pid(), 9)  # the crash: no flush, no goodbye
    terminal.wait_for(lambda s: "FORKDECK-EXIT=137" in s, "the process to die")
    terminal.start()
    terminal.wait_for(lambda s: "left open by an earlier session" in s, "the recovery dialog")
    terminal.key("Enter")  # the first row: reopen
    terminal.wait_for(
        lambda s: "✓ a" in s and "✓ b" in s and "+ overview" in s, "the reopened fork's tabs"
    )
    terminal.wait_for(lambda s: "✓ done" in s, "the overview's rows")
    terminal.key("Tab", "Tab")  # overview -> a -> b: b's recovered transcript
    terminal.wait_for(lambda s: "branch b" in s and "!echo b > b.txt" in s, "b's transcript")
    terminal.type("/merge")
    terminal.key("Enter")
    terminal.wait_for(lambda s: "Merge: pick the winning branch" in s, "the merge picker")
    terminal.key("2", "2")  # choose b, then the same digit again confirms (issue 24.14)
    terminal.wait_for(lambda s: "merged branch b" in s, "the merge notice")
    assert (terminal.workspace / "b.txt").read_text() == "b\n"
    assert not (terminal.workspace / "a.txt").exists()
    terminal.type("/quit")
    terminal.key("Enter")
    terminal.wait_for(lambda s: "FORKDECK-EXIT=0" in s, "a clean exit")
