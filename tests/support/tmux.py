"""tmux servers the end-to-end tests start on private sockets, and their clean-up.

``tmux kill-server`` stops the server but leaves its socket file in ``/tmp/tmux-<uid>/``,
so every run of the end-to-end tests used to leave one more behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
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
