"""The snapshot's hash cache (``snapshot.scan``): an unchanged file is not read again, a
changed one always is, even when its size stays the same (no Ray needed)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from branching_core.cluster import snapshot
from branching_core.cluster.snapshot import file_sha256, scan


def _tree(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.txt").write_text("alpha\n")
    (root / "b.txt").write_text("bravo\n")
    return root


def test_a_same_size_rewrite_is_seen_even_right_after_a_scan(tmp_path: Path) -> None:
    root = _tree(tmp_path / "ws")
    first = scan(root)
    (root / "b.txt").write_text("BRAVO\n")  # same size, same second
    second = scan(root)
    assert second["b.txt"][3] == file_sha256(root / "b.txt") != first["b.txt"][3]
    assert second["src/a.txt"] == first["src/a.txt"]


def test_old_files_are_not_read_again_and_changes_still_show(tmp_path: Path) -> None:
    root = _tree(tmp_path / "ws")
    time.sleep(snapshot.RACY_NS / 1e9 + 0.1)  # both files are now old enough to trust
    first = scan(root)
    remembered = snapshot._HASHES[os.fspath(root)]
    assert set(remembered) == {"src/a.txt", "b.txt"}
    assert scan(root) == first  # the remembered hashes give the same manifest
    (root / "b.txt").write_text("BRAVO\n")  # same size: the ctime (and mtime) moved
    third = scan(root)
    assert third["b.txt"][3] == file_sha256(root / "b.txt") != first["b.txt"][3]
    assert third["src/a.txt"] == first["src/a.txt"]
    # a deleted file is forgotten, a new one is hashed
    (root / "b.txt").unlink()
    (root / "c.txt").write_text("charlie\n")
    fourth = scan(root)
    assert "b.txt" not in fourth and fourth["c.txt"][3] == file_sha256(root / "c.txt")
