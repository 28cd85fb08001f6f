"""The mount helper's spares survive a request that arrives while it is making them.

Issue 29: spares were made only between a reply and the caller's next request, and
the work left when that request came was dropped, so a caller that aborts at once (a
Ray task: one branch, then its abort) found the spares its pool listed missing and
paid every branch on the spot. Now the helper pauses for the request and resumes
after it.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from branching_core import Workspace
from branching_core.workspace import mount_helper, reaper


def _spares(ws: Workspace) -> list[str]:
    spare = ws.tree.store.root / "spare"
    if not spare.exists():
        return []
    return sorted(p.name for p in spare.iterdir() if not p.name.endswith(".part"))


def _await_spares(ws: Workspace, count: int) -> list[str]:
    """Spares are made while the helper is idle: watch the directory (no request)."""
    deadline = time.monotonic() + 20
    while len(_spares(ws)) < count and time.monotonic() < deadline:
        time.sleep(0.005)
    return _spares(ws)


def _mounted_spares(ws: Workspace) -> list[str]:
    helper = mount_helper.helper_for(ws.tree.store.root)
    prefix = f"{ws.tree.store.root}/spare/"
    lines = Path(f"/proc/{helper.pid}/mounts").read_text().splitlines()
    return [line.split()[1] for line in lines if line.split()[1].startswith(prefix)]


@pytest.mark.parametrize("backend", ["overlay"])
def test_spares_interrupted_by_the_next_request_are_made_after_it(
    ws_dir: Path, backend: str
) -> None:
    ws = Workspace(ws_dir, backend=backend)
    first = ws.branch_many([f"a{i}" for i in range(8)], on_success=None, on_error=None)
    # at once: this request reaches the helper while it makes the 8 mounted spares
    ws.abort_many(first)
    made = _await_spares(ws, 8)
    assert len(made) == 8, f"spares lost after the first request: {made}"
    assert len(_mounted_spares(ws)) == 8
    second = ws.branch_many([f"b{i}" for i in range(8)], on_success=None, on_error=None)
    assert not set(made) & set(_spares(ws)), "the second batch did not take the spares"
    for kid in second:  # a branch made from a spare is an ordinary one
        assert sorted(p.name for p in kid.path.iterdir()) == ["a.txt", "sub"]
    ws.abort_many(second)
    ws.close()
    assert _spares(ws) == [] and _mounted_spares(ws) == []
    assert reaper.drain(30)


@pytest.mark.parametrize("backend", ["overlay"])
def test_single_branches_find_their_spare(ws_dir: Path, backend: str) -> None:
    """One branch, then its abort, again and again (a Ray worker's pattern): each
    branch after the first takes the spare the previous one asked for."""
    ws = Workspace(ws_dir, backend=backend)
    for i in range(6):
        before = _spares(ws)
        kid = ws.branch(f"k{i}", on_success=None, on_error=None)
        (kid.path / "x.txt").write_text(str(i))
        kid.abort()
        after = _await_spares(ws, 1)
        assert len(after) == 1, after  # the one for the next branch, made
        if i:
            assert before and not set(before) & set(after), "the spare was not taken"
    ws.close()
    assert _spares(ws) == []
    assert reaper.drain(30)


@pytest.mark.parametrize("backend", ["overlay"])
def test_a_spare_named_before_it_is_made_is_never_made(ws_dir: Path, backend: str) -> None:
    """Batches back to back name spares still queued: those branches are made on the
    spot and the helper drops the spares; close() (whose ``sync`` drops the queue)
    leaves none behind."""
    ws = Workspace(ws_dir, backend=backend)
    batches = [
        ws.branch_many([f"r{r}x{i}" for i in range(16)], on_success=None, on_error=None)
        for r in range(3)
    ]
    for batch in batches:
        for kid in batch:
            assert sorted(p.name for p in kid.path.iterdir()) == ["a.txt", "sub"]
        ws.abort_many(batch)
    ws.close()
    assert _spares(ws) == [] and _mounted_spares(ws) == []
    assert reaper.drain(30)
    assert list((ws.tree.store.root / "trash").iterdir()) == []
