"""15.3: a steer handed to a run too late for it to send is delivered, never dropped.

The queue used to hand the message to ``AgentRun.enqueue`` of a run that was already
finishing (no request left to carry it), report it as delivered, and forget it; a message
the run refused was "held" with nobody to ever deliver it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.capabilities import AbstractCapability

from branching_core.fork import BranchSpec, BranchSteerUndelivered, ForkCoordinator

from .helpers import Scripted, call, request_text


@dataclass
class SteerAtTheEnd(AbstractCapability[Any]):
    """Steers the branch once, from the run's very end (after its last request)."""

    coord: Any = None
    message: str = "late news"
    sent: list[bool] = field(default_factory=list)

    async def after_run(self, ctx: Any, *, result: Any) -> Any:
        if not self.sent and self.coord is not None:
            self.sent.append(self.coord.steer("a", self.message))
        return result


async def test_a_steer_the_run_could_not_send_becomes_the_next_turn(ws, runner) -> None:
    s = Scripted({"A": [call("write_file", path="a.txt", content="a"), "A: over"]})
    hook = SteerAtTheEnd()
    coord = ForkCoordinator(
        Agent(s.model, capabilities=[hook]), workspace=ws, command_runner=runner
    )
    hook.coord = coord
    await coord.fork([BranchSpec("a", "A")], parent_history=[])
    rt = coord.get_branch("a")
    while not (hook.sent and rt.state == "done" and rt.task is not None and rt.task.done()):
        await coord.wait(timeout=20)
    assert any("late news" in request_text(m) for _k, m in s.calls), (
        "the model never received the steer"
    )
    assert rt.queue.delivered.count("late news") == 1 and rt.queue.held == []
    await coord.aclose()


async def test_a_steer_that_cannot_be_sent_is_reported(ws, runner) -> None:
    s = Scripted({"A": [call("write_file", path="a.txt", content="a"), "A: over"]})
    hook = SteerAtTheEnd()
    coord = ForkCoordinator(
        Agent(s.model, capabilities=[hook]), workspace=ws, command_runner=runner
    )
    hook.coord = coord
    undelivered: list[BranchSteerUndelivered] = []
    coord.add_listener(
        lambda e: undelivered.append(e) if isinstance(e, BranchSteerUndelivered) else None
    )
    await coord.fork([BranchSpec("a", "A")], parent_history=[])
    # Merging it at once: the merge waits for the run, which is steered at its very end;
    # the branch is merged meanwhile, so the steer cannot become a new turn: reported.
    result = await coord.merge_or_select("pick:a")
    assert result.winner_label == "a" and hook.sent
    for _ in range(5):
        await coord.flush()
    assert [e.messages for e in undelivered] == [("late news",)], undelivered
    assert "resolved" in undelivered[0].reason
