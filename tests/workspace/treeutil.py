"""Compare directory trees exactly: type, permission bits, content, link target."""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

Snapshot = dict[str, tuple[str, int, str]]


def snapshot(root: Path, *, skip_state: bool = True) -> Snapshot:
    state: Snapshot = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if skip_state and rel_dir == ".":
            dirnames[:] = [d for d in dirnames if d != ".pydantic-deep"]
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            st = os.lstat(full)
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                state[rel] = ("link", 0, os.readlink(full))
            elif stat.S_ISDIR(st.st_mode):
                state[rel] = ("dir", mode, "")
            else:
                with open(full, "rb") as fh:
                    state[rel] = ("file", mode, hashlib.sha256(fh.read()).hexdigest())
    return state


def make_repo_like_tree(root: Path) -> None:
    """A small tree with what real repositories hold."""
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "src" / "pkg" / "__init__.py").write_text("")
    (root / "src" / "pkg" / "core.py").write_text("def f():\n    return 1\n")
    (root / "docs").mkdir()
    (root / "docs" / "guide.md").write_text("# guide\n")
    (root / "olddir" / "inner").mkdir(parents=True)
    (root / "olddir" / "inner" / "x.txt").write_text("x\n")
    (root / "becomes_file").mkdir()
    (root / "becomes_file" / "child.txt").write_text("child\n")
    (root / "becomes_dir").write_text("i am a file\n")
    (root / "recreated").mkdir()
    (root / "recreated" / "old.txt").write_text("old\n")
    (root / "empty_dir").mkdir()
    (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    os.chmod(root / "run.sh", 0o755)
    (root / "blob.bin").write_bytes(bytes(range(256)) * 4096)
    (root / ".git").mkdir()
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / "ünïcode name.txt").write_text("ü\n")
    (root / "link_in").symlink_to("docs/guide.md")
    (root / "a.txt").write_text("a\n")
