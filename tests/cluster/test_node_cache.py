"""The node-local cache: built once under concurrency, bounded, never evicting a tree in use."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from branching_core.cluster.node_cache import CachedTree, acquire
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


def test_a_task_waiting_for_a_build_does_not_wait_for_the_builder_to_finish_using_it(
    tmp_path: Path,
) -> None:
    """The builder keeps using the tree (its candidate runs); a task that arrived
    while it was building must get the tree as soon as it is built, not when the
    builder's candidate ends (it used to wait for an exclusive lock behind it)."""
    snap = pack(take(make_tree(tmp_path / "ws")))
    building, go = threading.Event(), threading.Event()

    def slow_meta() -> tuple[Manifest, dict[str, tuple[int, int, int]]]:
        building.set()
        go.wait(30)
        return snap.manifest, snap.blobs

    got: dict[str, object] = {}
    builder = threading.Thread(target=lambda: got.setdefault(
        "a", acquire(tmp_path / "cache", snap.key, slow_meta, lambda i: snap.packs[i])))
    builder.start()
    assert building.wait(30)
    waiter = threading.Thread(target=lambda: got.setdefault(
        "b", acquire(tmp_path / "cache", snap.key, *_getters(snap, []))))
    waiter.start()
    time.sleep(0.2)  # let the waiter reach the lock (the test passes either way if not)
    go.set()
    builder.join(30)
    waiter.join(30)  # the builder still holds its tree
    assert not waiter.is_alive(), "the waiting task is stuck behind the builder's use"
    a, b = got["a"], got["b"]
    assert isinstance(a, CachedTree) and isinstance(b, CachedTree)
    assert a.materialised and not b.materialised
    a.release()
    b.release()
