"""The pre-merge record (what ``fork:<id>`` rewinds to) costs no copy on the event loop.

Issue 12.10: the checkpoint copied every file the merge replaced, synchronously on the
loop thread, before the commit (a 100 MB file froze a TUI for 200-340 ms). Now the files
are held open across the commit and copied afterwards in a worker thread; the record is
still exact (rewind restores the pre-merge bytes) and a record a killed process never
finished refuses to rewind instead of restoring wrong bytes.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent

from branching_core.fork import BranchSpec, CheckpointStore, ForkCoordinator, ForkStore

from .helpers import Scripted, call

_writes: list[tuple[str, int]] = []
_watch: list[str] = []


def _audit(event: str, args: tuple[Any, ...]) -> None:
    """Record which thread opens a file under a watched directory (a real audit hook)."""
    if event == "open" and _watch and isinstance(args[0], str | os.PathLike):
        path = os.fspath(args[0])
        if isinstance(path, str) and any(path.startswith(w) for w in _watch):
            _writes.append((path, threading.get_ident()))


sys.addaudithook(_audit)


async def test_merge_copies_no_replaced_file_on_the_event_loop(ws, project: Path, runner) -> None:
    (project / "big.bin").write_bytes(b"before" * 100_000)
    s = Scripted(
        {
            "A": [
                call("write_file", path="src/app.py", content="VALUE = 2\n"),
                call("write_file", path="big.bin", content="after"),
                call("write_file", path="new.txt", content="n"),
            ]
        }
    )
    coord = ForkCoordinator(Agent(s.model), workspace=ws, command_runner=runner)
    handle = await coord.fork([BranchSpec("a", "A")], parent_history=[])
    await coord.wait(timeout=20)
    checkpoint_dir = str(ForkStore(project).fork_dir(handle.fork_id) / "checkpoints")
    _writes.clear()
    _watch[:] = [checkpoint_dir]
    try:
        result = await coord.merge_or_select("pick:a")
        await coord.flush()
    finally:
        _watch.clear()
    assert sorted(result.applied_paths) == ["big.bin", "new.txt", "src/app.py"]
    copied = {Path(p).name for p, _ in _writes}
    assert {"app.py", "big.bin"} <= copied, copied  # both pre-images were recorded...
    loop_thread = threading.get_ident()
    on_loop = [p for p, ident in _writes if ident == loop_thread and "/files/" in p]
    assert on_loop == [], f"copied on the event loop: {on_loop}"  # ...none on the loop

    # The record is exact: rewinding restores the pre-merge bytes of every replaced file.
    assert (project / "big.bin").read_text() == "after"
    assert handle.parent_checkpoint_id is not None
    await coord.rewind_to_checkpoint(handle.parent_checkpoint_id)
    assert (project / "big.bin").read_bytes() == b"before" * 100_000
    assert (project / "src/app.py").read_text() == "VALUE = 1\n"
    assert not (project / "new.txt").exists()


def test_unfinished_record_refuses_to_rewind(project: Path) -> None:
    """A process killed between the commit and the copies leaves a marked, refused record."""
    store = CheckpointStore(ForkStore(project))
    store.save("f1", "fork", b"[]")
    held = store.hold_files("f1", "fork", project, ["src/app.py"])
    held.close()  # what a killed process leaves: nothing copied, marker still there
    with pytest.raises(RuntimeError, match="incomplete"):
        store.rewind("fork:f1")
    assert (project / "src/app.py").read_text() == "VALUE = 1\n"

    held = store.hold_files("f1", "fork", project, ["src/app.py"])
    (project / "src/app.py").unlink()
    (project / "src/app.py").write_text("VALUE = 5\n")  # replaced by rename-like new inode
    held.finish()
    store.rewind("fork:f1")
    assert (project / "src/app.py").read_text() == "VALUE = 1\n"
