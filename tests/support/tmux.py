"""tmux servers the end-to-end tests start on private sockets, the ``Terminal`` that
drives the real ``forkdeck`` in one, and their clean-up.

``tmux kill-server`` stops the server but leaves its socket file in ``/tmp/tmux-<uid>/``,
so every run of the end-to-end tests used to leave one more behind.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

TMUX = shutil.which("tmux")


def socket_path(socket: str) -> Path:
    """Where ``tmux -L socket`` keeps its server socket."""
    base = os.environ.get("TMUX_TMPDIR") or "/tmp"
    return Path(base) / f"tmux-{os.getuid()}" / socket


def kill_server(socket: str) -> None:
    """Stop the server on ``socket`` (if it runs) and remove its socket file."""
    subprocess.run(
        [TMUX or "tmux", "-L", socket, "kill-server"],
        capture_output=True,
        timeout=30,
        check=False,
    )
    with contextlib.suppress(FileNotFoundError):
        socket_path(socket).unlink()


REPO = Path(__file__).resolve().parents[2]
KEY_GAP = 0.15
"""Seconds between two keys: a person's pace (a key that moves the focus is handled after
the keys queued behind it, so a machine-speed burst is not what a person types)."""


@dataclass
class Terminal:
    """One detached tmux session on a private server socket, running the real ``forkdeck``
    (``python -m forkdeck.entry``) in ``workspace`` with nothing of the test's environment but
    ``env``; the end-to-end tests (tests/app, tests/realserver) all drive it."""

    socket: str
    workspace: Path
    env: dict[str, str]
    name: str = "forkdeck"

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            [TMUX or "tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        return done.stdout

    def start(self, *args: str) -> None:
        """(Re)start forkdeck with ``args``; the pane prints ``FORKDECK-EXIT=<status>``."""
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        quoted = "".join(f" {shlex.quote(a)}" for a in args)
        command = (
            f"cd {shlex.quote(str(self.workspace))} && env -i {exports} "
            f"{shlex.quote(sys.executable)} -m forkdeck.entry .{quoted} ; "
            "echo FORKDECK-EXIT=$?; sleep 60"
        )
        self.tmux("kill-session", "-t", self.name)
        # The server is told not to exit when its last session goes: a restart's
        # kill-session would otherwise stop it while the new-session that follows is
        # already talking to it, and the new session would vanish with it (an empty
        # screen for the whole wait, seen once in CI).
        self.tmux("new-session", "-d", "-s", self.name, "-x", "160", "-y", "48", command,
                  ";", "set-option", "-g", "exit-empty", "off")
        if not self._has_session():  # the old server was exiting all the same: once more
            self.tmux("new-session", "-d", "-s", self.name, "-x", "160", "-y", "48", command,
                      ";", "set-option", "-g", "exit-empty", "off")

    def _has_session(self) -> bool:
        done = subprocess.run(
            [TMUX or "tmux", "-L", self.socket, "-f", "/dev/null", "has-session", "-t", self.name],
            capture_output=True, timeout=30, check=False,
        )
        return done.returncode == 0

    def _state(self) -> str:
        """What the server says, for a wait that timed out on an empty screen."""
        done = subprocess.run(
            [TMUX or "tmux", "-L", self.socket, "-f", "/dev/null", "list-panes", "-a", "-F",
             "#{session_name} pid=#{pane_pid} dead=#{pane_dead} cmd=#{pane_current_command}"],
            capture_output=True, text=True, timeout=30, check=False,
        )
        return (done.stdout + done.stderr).strip()

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", self.name)

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", self.name, "-l", text)
        time.sleep(KEY_GAP)

    def key(self, *keys: str) -> None:
        """One key at a time, at typing pace (see :data:`KEY_GAP`)."""
        for key in keys:
            self.tmux("send-keys", "-t", self.name, key)
            time.sleep(KEY_GAP)

    def burst(self, *keys: str) -> None:
        """Every key in ONE ``send-keys`` call, as a fast typist's keys arrive in one read;
        arguments that are not tmux key names are sent as literal text."""
        self.tmux("send-keys", "-t", self.name, *keys)

    def wait_for(self, check: Callable[[str], bool], what: str, timeout: float = 60.0) -> str:
        """Poll the screen until ``check`` holds (the timeout only turns a hang into a failure)."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen()
            if check(text):
                return text
            if time.monotonic() > deadline:
                state = "" if text.strip() else f"\n(tmux: {self._state() or 'nothing'})"
                raise AssertionError(f"waited for {what}; the screen shows:\n{text}{state}")
            time.sleep(0.2)

    def fork_two_rows(self, steer_a: str, steer_b: str) -> str:
        """``/fork``, type a steer into each of the picker's two rows, submit (ctrl+s).

        Focus starts on row 1's label and Tab walks label -> steer -> model -> budget -> next
        row. Returns the picker's screen as it first appeared, for checks on what it says.
        """
        self.type("/fork")
        self.key("Enter")
        picker = self.wait_for(lambda s: "Fork into 2 branches" in s, "the fork picker")
        self.key("Tab")
        self.type(steer_a)
        self.key("Tab", "Tab", "Tab", "Tab")
        self.type(steer_b)
        self.key("C-s")
        return picker

    def app_pid(self) -> int:
        """The pid of the forkdeck Python process (the pane's shell's child)."""
        shell = int(self.tmux("display-message", "-p", "-t", self.name, "#{pane_pid}").strip())
        out = subprocess.run(
            ["ps", "-o", "pid=,args=", "--ppid", str(shell)],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        for line in out.splitlines():
            pid, _, args = line.strip().partition(" ")
            if "forkdeck.entry" in args:
                return int(pid)
        raise AssertionError(f"no forkdeck process under the pane's shell: {out!r}")


@contextlib.contextmanager
def forkdeck_terminal(tmp_path: Path, prefix: str) -> Iterator[Terminal]:
    """A :class:`Terminal` on a new workspace (``README.txt`` = ``hello``) under
    ``tmp_path``, on a socket ``prefix-<random>``; its server is gone afterwards."""
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    (workspace / "README.txt").write_text("hello\n")
    env = {
        "PYTHONPATH": str(REPO),
        "TERM": "xterm-256color",
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
    }
    if "FORKDECK_STORE" in os.environ:
        env["FORKDECK_STORE"] = os.environ["FORKDECK_STORE"]
    term = Terminal(f"{prefix}-{uuid.uuid4().hex[:8]}", workspace, env)
    try:
        yield term
    finally:
        kill_server(term.socket)
