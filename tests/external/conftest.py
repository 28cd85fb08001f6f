"""Shared pieces of the external-agent tests: a small git project with a failing test,
the scripted agent's command line, and a home outside /tmp (the sandbox's /tmp is
private, so a home there would be hidden whatever the masks do)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from branching_core.sandbox import sandbox_available

AGENT = Path(__file__).with_name("scripted_agent.py")
CHECK = "from calc import add\nassert add(2, 3) == 5, add(2, 3)\n"


def agent_cmd(*args: str) -> str:
    """``cmd:`` spec of the scripted agent (the prompt goes to its terminal)."""
    return "cmd:" + " ".join([sys.executable, str(AGENT), *args])


@pytest.fixture
def project(tmp_path: Path) -> Path:
    if not sandbox_available()[0]:
        pytest.skip(f"sandbox unavailable: {sandbox_available()[1]}")
    root = tmp_path / "proj"
    root.mkdir()
    (root / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (root / "check.py").write_text(CHECK)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


@pytest.fixture
def fake_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``HOME`` in /var/tmp holding an SSH key and an agent's config directory."""
    home = Path("/var/tmp") / f"forkdeck-home-{uuid.uuid4().hex[:8]}"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    (home / ".fakeagent").mkdir()
    (home / ".fakeagent" / "config").write_text("token = abc\n")
    monkeypatch.setenv("HOME", str(home))
    try:
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def leftover_processes(token: str) -> list[int]:
    """Pids whose command line holds ``token``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                if token.encode() in fh.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found
