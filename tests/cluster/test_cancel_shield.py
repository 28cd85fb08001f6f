"""CancelShield with the interrupt Ray's plain cancel really sends.

Ray's ``ray.cancel(ref)`` reaches a running task through ``_thread.interrupt_main()``
(the worker's ``kill_main_task``), raised as ``KeyboardInterrupt`` at the next
bytecode the main thread runs. These tests send exactly that interrupt on pytest's
main thread, at chosen instants, so the point where it lands is not left to chance
(the Ray test ``test_a_cancel_while_a_candidate_starts_...`` covers it end to end).
"""

from __future__ import annotations

import _thread
import signal
import threading
from pathlib import Path

import pytest

from branching_core.cluster.cancel_shield import CancelShield
from branching_core.workspace import Workspace


def _interrupt() -> None:
    """What Ray's ``kill_main_task`` does on the node."""
    _thread.interrupt_main()


def test_a_cancel_during_setup_waits_for_the_cancellable_section(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "a.txt").write_text("a")
    ws = Workspace(tmp_path / "ws")
    steps: list[str] = []
    with pytest.raises(KeyboardInterrupt), CancelShield() as shield:
        _interrupt()  # the cancel arrives just before the branch is made
        branch = ws.branch("b", on_success=None, on_error=None)
        steps.append("branched")  # the whole branch call ran
        try:
            assert shield.cancelled
            with shield.cancellable():
                steps.append("ran the candidate")  # never: the cancel is raised first
        finally:
            _interrupt()  # a second cancel during the cleanup is ignored
            branch.abort()
            steps.append("aborted")
    assert steps == ["branched", "aborted"]
    assert not branch.is_open
    assert (tmp_path / "ws" / "a.txt").read_text() == "a"
    ws.close()


def test_a_cancel_inside_the_cancellable_section_interrupts_it_once() -> None:
    steps: list[str] = []
    with pytest.raises(KeyboardInterrupt), CancelShield() as shield:
        try:
            with shield.cancellable():
                _interrupt()
                for _ in range(10_000_000):  # the interrupt lands in here
                    pass
                steps.append("finished")
        finally:
            _interrupt()
            for _ in range(100_000):  # the cleanup runs many bytecodes: not interrupted
                pass
            steps.append("cleaned up")
    assert steps == ["cleaned up"]


def test_a_cancel_after_the_last_section_ends_the_task_as_cancelled() -> None:
    """One that came while collecting the result still makes the task cancelled."""
    done: list[str] = []
    with pytest.raises(KeyboardInterrupt), CancelShield():
        _interrupt()
        for _ in range(100_000):
            pass
        done.append("collected")
    assert done == ["collected"]


def test_no_cancel_changes_nothing_and_the_handler_is_put_back() -> None:
    before = signal.getsignal(signal.SIGINT)
    with CancelShield() as shield:
        with shield.cancellable():
            pass
        assert not shield.cancelled
    assert signal.getsignal(signal.SIGINT) is before


def test_off_the_main_thread_the_shield_does_nothing() -> None:
    """Python delivers interrupts only to the main thread; a shield entered elsewhere
    installs no handler (``signal.signal`` would raise there)."""
    seen: list[object] = []

    def body() -> None:
        with CancelShield() as shield:
            with shield.cancellable():
                seen.append(signal.getsignal(signal.SIGINT))
            seen.append(shield.cancelled)

    before = signal.getsignal(signal.SIGINT)
    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert seen == [before, False]
