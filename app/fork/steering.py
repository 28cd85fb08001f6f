"""Talking to the branches of a live fork: ``>>label message`` steers a running branch,
plain text on a finished branch's tab starts a new turn there, and a branch that asks
for tool approval gets the approval modal.

Why together: the three are the user's side of one conversation per branch, each a call
on the coordinator with the same "which branch, in which state" checks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .view import lazy

if TYPE_CHECKING:
    from ..commands import Steer
    from .ports import ForkHost


def steer(screen: ForkHost, command: Steer) -> None:
    coordinator = screen.session.coordinator
    assert coordinator is not None
    labels = [status.label for status in coordinator.inspect_branches()]
    if command.label not in labels:
        screen.notice(
            f"no branch {command.label!r} in this fork; branches: {', '.join(labels)}", "error"
        )
        return
    try:
        coordinator.steer(command.label, command.message)
    except RuntimeError as exc:
        if "cannot be steered" in str(exc):  # an external agent that reads no input
            screen.notice(str(exc), "warning")
            return
        screen.notice(
            f"branch {command.label} is not running: select its tab "
            f"(alt+{labels.index(command.label) + 1}) and type to start a new turn there",
            "warning",
        )
        return
    screen.notice(f">>{command.label}: {command.message}", toast=True)


def branch_follow_up(screen: ForkHost, label: str | None, text: str) -> None:
    """A new turn on the finished branch ``label`` (its tab is in front)."""
    screen.run_worker(_follow_up(screen, label, text), group="branch-turn")


async def _follow_up(screen: ForkHost, label: str | None, text: str) -> None:
    coordinator = screen.session.coordinator
    if coordinator is None or label is None:
        return
    state = coordinator.get_branch(label).state
    if state == "running":
        screen.notice(
            f"branch {label} is still running: wait for it, or steer it with >>{label} {text}",
            "warning",
        )
        return
    if screen.fork_area is not None:
        screen.fork_area.add_user_message(label, text)
    try:
        await coordinator.run_on_branch(label, text)
    except RuntimeError as exc:
        screen.notice(str(exc), "error")


def ask_approval(screen: ForkHost, label: str, calls: Any) -> None:
    """The approval modal for branch ``label``'s pending tool calls."""
    screen.run_worker(_approval(screen, label, calls), group="approval")


async def _approval(screen: ForkHost, label: str, calls: Any) -> None:
    modal_cls = lazy("forkdeck.fork.approval", "ApprovalModal")
    coordinator = screen.session.coordinator
    if coordinator is None:
        return
    decisions = await screen.ask(modal_cls(label, calls))
    if decisions is None:
        return
    approve = getattr(coordinator, "approve", None)
    if approve is None:
        screen.notice("this coordinator cannot take approvals", "error")
        return
    await approve(label, decisions)
    approved = sum(1 for ok in decisions.values() if ok)
    screen.notice(f"branch {label}: {approved} of {len(decisions)} tool calls approved")
