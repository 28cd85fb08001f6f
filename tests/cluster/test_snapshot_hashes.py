"""The snapshot's hash cache (``snapshot.scan``): an unchanged file is not read again, a
changed one always is, even when its size stays the same (no Ray needed)."""

from __future__ import annotations

import os
import stat
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


def _walk_manifest(root: Path) -> list[tuple[str, tuple[object, ...]]]:
    """What the manifest must hold, from ``os.walk`` + ``lstat`` (the old scan)."""
    out: list[tuple[str, tuple[object, ...]]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir == ".":
            dirnames[:] = [d for d in dirnames if d != ".pydantic-deep"]
        dirnames.sort()
        for name in [*dirnames, *sorted(filenames)]:
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            st = os.lstat(root / rel)
            if stat.S_ISDIR(st.st_mode):
                out.append((rel, ("d", stat.S_IMODE(st.st_mode))))
            elif stat.S_ISLNK(st.st_mode):
                out.append((rel, ("l", os.readlink(root / rel))))
            elif stat.S_ISREG(st.st_mode):
                out.append((rel, ("f", stat.S_IMODE(st.st_mode), st.st_size,
                                  file_sha256(root / rel))))
    return out


def test_the_scandir_walk_lists_what_os_walk_did_in_the_same_order(tmp_path: Path) -> None:
    root = _tree(tmp_path / "ws")
    (root / ".pydantic-deep").mkdir()
    (root / ".pydantic-deep" / "state").write_text("never shipped")
    (root / "src" / "deep" / "er").mkdir(parents=True)
    (root / "src" / "deep" / "er" / "z.txt").write_text("z")
    (root / "src" / "deep" / "b.bin").write_bytes(b"\0" * 10)
    (root / "linked").symlink_to("src")  # a symlinked directory: listed, not entered
    (root / "dangling").symlink_to("nowhere")
    os.mkfifo(root / "pipe")  # never shipped
    (root / "src" / "x.sh").write_text("#!/bin/sh\n")
    (root / "src" / "x.sh").chmod(0o755)
    assert list(scan(root).items()) == _walk_manifest(root)


def test_an_unchanged_tree_keeps_its_key_and_any_change_makes_a_new_one(tmp_path: Path) -> None:
    root = _tree(tmp_path / "ws")
    first = snapshot.take(root)
    assert snapshot.take(root).key == first.key == snapshot.manifest_hash(first.manifest)
    first.manifest.clear()  # a caller's own copy: the remembered one is not changed
    assert snapshot.take(root).key == snapshot.manifest_hash(scan(root))
    (root / "src" / "a.txt").chmod(0o600)
    second = snapshot.take(root)
    assert second.key != first.key and second.key == snapshot.manifest_hash(second.manifest)
    (root / "new").mkdir()
    assert snapshot.take(root).key not in {first.key, second.key}
