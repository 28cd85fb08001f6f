"""The node-local cache: built once under concurrency, bounded, never evicting a tree in use."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from branching_core.cluster.node_cache import acquire
from branching_core.cluster.snapshot import Manifest, Snapshot, pack, take
from tests.cluster.helpers import make_tree, tree_state


def _getters(
    snap: Snapshot, calls: list[str]
) -> tuple[Callable[[], tuple[Manifest, dict[str, tuple[int, int, int]]]], Callable[[int], bytes]]:
    def meta() -> tuple[Manifest, dict[str, tuple[int, int, int]]]:
        calls.append("meta")
        return snap.manifest, snap.blobs

    def get_pack(i: int) -> bytes:
        return snap.packs[i]

    return meta, get_pack


def test_concurrent_tasks_materialise_a_snapshot_once(tmp_path: Path) -> None:
    snap = pack(take(make_tree(tmp_path / "ws")))
    calls: list[str] = []
    meta, get_pack = _getters(snap, calls)
    held = []
    lock = threading.Lock()

    def task() -> None:
        h = acquire(tmp_path / "cache", snap.key, meta, get_pack)
        with lock:
            held.append(h)

    threads = [threading.Thread(target=task) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == ["meta"]
    assert sum(h.materialised for h in held) == 1
    assert tree_state(held[0].tree) == snap.manifest
    assert len((tmp_path / "cache" / "materialisations.log").read_text().splitlines()) == 1
    for h in held:
        h.release()


def test_the_cache_is_bounded_lru_but_keeps_trees_in_use(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    snaps = []
    for i in range(3):
        root = make_tree(tmp_path / f"ws{i}")
        (root / "big.bin").write_bytes(bytes([i]) * 100_000)
        snaps.append(pack(take(root)))
    bound = 150_000  # room for one tree, not two
    first = acquire(cache, snaps[0].key, *_getters(snaps[0], []), cache_bytes=bound)
    second = acquire(cache, snaps[1].key, *_getters(snaps[1], []), cache_bytes=bound)
    # the first is still held: it must survive although the cache is over its bound
    assert first.tree.exists() and second.tree.exists()
    first.release()
    second.release()
    third = acquire(cache, snaps[2].key, *_getters(snaps[2], []), cache_bytes=bound)
    third.release()
    kept = sorted(p.name for p in (cache / "snapshots").iterdir() if p.is_dir())
    assert kept == [snaps[2].key]
