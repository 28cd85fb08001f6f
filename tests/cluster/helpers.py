"""Tree fixtures shared by the cluster tests (no Ray needed here)."""

from __future__ import annotations

import os
from pathlib import Path

from branching_core.cluster.snapshot import scan


def make_tree(root: Path) -> Path:
    """A small workspace with a bit of everything the snapshot must carry."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "a.txt").write_text("alpha\n")
    (root / "gone.txt").write_text("to be deleted\n")
    (root / "old_name.txt").write_text("renamed later\n")
    (root / "bin").mkdir()
    (root / "bin" / "tool.sh").write_text("#!/bin/sh\necho hi\n")
    os.chmod(root / "bin" / "tool.sh", 0o755)
    (root / "blob.bin").write_bytes(bytes(range(256)) * 64)
    (root / "link").symlink_to("a.txt")
    (root / "olddir" / "deep").mkdir(parents=True)
    (root / "olddir" / "deep" / "f").write_text("deep\n")
    (root / "typechange").write_text("file that becomes a dir\n")
    (root / ".pydantic-deep").mkdir()
    (root / ".pydantic-deep" / "state.json").write_text("{}")
    return root


def edit_everything(path: Path) -> None:
    """A candidate's edits: creates, modifies, deletes, renames, modes, links, binary."""
    p = Path(path)
    (p / "a.txt").write_text("alpha, edited\n")
    (p / "gone.txt").unlink()
    (p / "old_name.txt").rename(p / "new_name.txt")
    os.chmod(p / "bin" / "tool.sh", 0o700)
    (p / "blob.bin").write_bytes(bytes(reversed(range(256))) * 64 + b"\x00\xff")
    (p / "link").unlink()
    (p / "link").symlink_to("bin/tool.sh")
    (p / "newlink").symlink_to("../outside")
    import shutil

    shutil.rmtree(p / "olddir")
    (p / "typechange").unlink()
    (p / "typechange").mkdir()
    (p / "typechange" / "inner.txt").write_text("now a dir\n")
    (p / "fresh" / "sub").mkdir(parents=True)
    (p / "fresh" / "sub" / "x.dat").write_bytes(b"\x00\x01\x02")
    os.chmod(p / "fresh", 0o750)


def tree_state(root: Path) -> dict[str, tuple[object, ...]]:
    """Everything the workspace holds (but the project state dir), for comparison."""
    return scan(root)


# A store's own directories, not branches: sessions, generations, the journal, the
# reaper's trash, durable-batch markers, and the spare pool the overlay backend keeps
# ready while a workspace is open (workspace/backends/spares.py; removed by close()).
STORE_BOOKKEEPING = frozenset({"sessions", "gen", "journal", "trash", "batches", "spare"})
