"""Fork branches whose agent is an external process (``BranchSpec.model = "agent:NAME"``).

Why a seam here: a fork's branches are pydantic-ai runs, but a user may want one branch
to be Claude Code or aider. The coordinator stays the same (one workspace branch per
row, states, events, merge, combine, judge); only what runs in the branch differs. The
fork layer defines the protocol it needs (``ExternalBranchRunner``) and front doors
implement it (``branching_core.external.fork_runner``), handed in as
``ForkOptions.external_runner``: the fork layer never imports them.

The process's terminal output is published as ``BranchTerminalOutput`` (ANSI kept, one
event per line); ``>>label text`` reaches ``ExternalBranchHandle.steer``; terminating the
branch cancels the task, which kills the process tree.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from branching_core.errors import InvalidStateError, error_name
from branching_core.fork import events as ev

if TYPE_CHECKING:
    from branching_core.fork.run_loop import BranchRunner
    from branching_core.fork.runtime import BranchRuntime

AGENT_PREFIX = "agent:"


def is_external(model: str | None) -> bool:
    """Whether a branch spec's model names an external agent profile."""
    return bool(model) and str(model).startswith(AGENT_PREFIX)


class ExternalBranchHandle(Protocol):
    """A running external agent, as the coordinator steers and reports it."""

    def steer(self, text: str) -> bool:
        """Type ``text`` to the agent; False when it reads no input while it works."""
        ...


class ExternalBranchRunner(Protocol):
    """Runs one fork branch's external agent to its end (cancellation kills it)."""

    async def run(self, rt: BranchRuntime, prompt: str, on_line: Callable[[str], None],
                  on_start: Callable[[ExternalBranchHandle], None]
                  ) -> tuple[int | None, str | None]:
        """``(exit code, error)``; ``on_start`` gets the handle once the agent runs."""
        ...


def external_prompt(steer: str | None, history: list[Any]) -> str:
    """What an external agent is asked: the conversation's last user prompt, then the
    row's steer (an external agent does not get the chat's history, only this text)."""
    last = ""
    for message in reversed(history):
        for part in getattr(message, "parts", ()):
            if getattr(part, "part_kind", "") == "user-prompt" and isinstance(
                    getattr(part, "content", None), str):
                last = part.content
                break
        if last:
            break
    return "\n\n".join(text for text in (last, steer or "") if text.strip()) or "continue"


async def run_external_branch(runner: BranchRunner, rt: BranchRuntime, prompt: str) -> None:
    """The task of an external branch: run it, publish its terminal, settle its state."""
    external: ExternalBranchRunner | None = runner.fc.options.external_runner
    fid = runner.fork_id or ""

    def on_line(line: str) -> None:
        runner.publish(ev.BranchTerminalOutput(fork_id=fid, branch_id=rt.branch_id,
                                                     label=rt.label, text=line))

    def on_start(handle: ExternalBranchHandle) -> None:
        rt.external = handle

    try:
        if external is None:
            raise InvalidStateError(f"no runner for external agents here ({rt.spec.model})")
        code, error = await external.run(rt, prompt, on_line, on_start)
        rt.output = f"{rt.spec.model} exited {code}" if code is not None else None
        if rt.state == "running":
            if code == 0:
                runner.set_state(rt, "done", persist=False)
            else:
                rt.error = error or f"{rt.spec.model} exited {code}"
                runner.set_state(rt, "failed", persist=False)
    except asyncio.CancelledError:
        if rt.state == "running":
            runner.set_state(rt, "terminated", persist=False)
    except Exception as exc:
        rt.error = f"{error_name(exc)}: {exc}"
        if rt.state == "running":
            runner.set_state(rt, "failed", persist=False)
    finally:
        rt.external = None
        rt.finished_at = time.time()
        runner.recorder.persist_or_report(rt)
        if rt.finished_event is not None:
            rt.finished_event.set()


__all__ = ["AGENT_PREFIX", "ExternalBranchHandle", "ExternalBranchRunner", "external_prompt",
           "is_external", "run_external_branch"]
