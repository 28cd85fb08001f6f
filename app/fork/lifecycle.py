"""A fork's life on the screen: ``/fork`` (picker, spawn, show), Esc on a branch or the
overview (terminate, abort), and a fork an earlier session left open (reopen, merge, abort).

Why together: these are the ways a fork begins and ends other than a merge; each asks the
user in a modal, calls the session, and opens or closes the fork view.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from .view import lazy

if TYPE_CHECKING:
    from .ports import ForkHost


def start_fork(screen: ForkHost) -> None:
    """``/fork``: the fork picker, then the branches, then the fork view."""
    screen.run_worker(_fork_flow(screen), group="fork", exclusive=True)


async def _fork_flow(screen: ForkHost) -> None:
    picker_cls = lazy("forkdeck.fork.fork_picker", "ForkPickerModal")
    session = screen.session
    settings = session.settings
    request = await screen.ask(
        picker_cls(
            settings.fork_branch_count,
            settings,
            default_model=session.model_label,
            cursor_blink=screen.cursor_blink,
            budget_note=session.budget_note(),
            estimator=lazy("forkdeck.review.fork_estimate", "estimator_for")(session),  # 17.5
        )
    )
    if request is None:
        screen.notice("fork cancelled")
        return
    try:
        # the session's busy label ("spawning N branches") is the spinner meanwhile
        coordinator = await session.start_fork(list(request.specs), request.aggregate_budget_usd)
    except Exception as exc:
        screen.notice(f"fork failed: {exc}", "error")
        return
    await screen.fork_view.open(coordinator)
    labels = ", ".join(spec.label for spec in request.specs)
    screen.notice(f"forked {len(request.specs)} branches: {labels}")


def confirm_escape(screen: ForkHost, label: str | None) -> None:
    """Esc on branch ``label`` (terminate it) or on the overview (None: abort the fork)."""
    screen.run_worker(_confirm_escape(screen, label), group="escape", exclusive=True)


async def _confirm_escape(screen: ForkHost, label: str | None) -> None:
    confirm_cls = lazy("forkdeck.common.confirm", "ConfirmModal")
    coordinator = screen.session.coordinator
    if coordinator is None:
        return
    if label is not None and coordinator.get_branch(label).state != "running":
        if screen.fork_area is not None:  # 13.13: nothing to terminate: back to the overview
            screen.fork_area.select(None)
        return
    question = f"Terminate branch {label}?" if label else "Abort the entire fork?"
    if not await screen.ask(confirm_cls(question)):
        return
    if label is None:
        ids = await screen.session.abort_fork()
        screen.fork_view.close()
        screen.notice(f"fork aborted: {len(ids)} branches discarded, no file changed")
    else:
        status = await coordinator.terminate_branch(label)
        screen.notice(f"branch {label}: {status.state}")
    screen.refresh_status()


def offer_recovery(
    screen: ForkHost, open_forks: list[dict[str, Any]], *, at_start: bool = False
) -> None:
    """A fork left open by an earlier session: reopen it, merge a branch, or abort it.

    ``at_start``: offered unasked as the app starts, so a typing burst under way as it
    appears is not taken as an answer (``/fork`` asked for it: the next key answers)."""
    if any(w.group == "recover" and w.is_running for w in screen.workers):
        # a /fork typed ahead while the dialog was up (or its choice is being carried
        # out): one dialog, answered once
        screen.notice("the fork from an earlier session is being handled: see the dialog")
        return
    screen.run_worker(_recovery(screen, open_forks, at_start), group="recover")


async def _recovery(
    screen: ForkHost, open_forks: list[dict[str, Any]], at_start: bool = False
) -> None:
    modal_cls = lazy("forkdeck.fork.recover_fork", "RecoverForkModal")
    session = screen.session
    modal = modal_cls(open_forks)
    modal.REFUSE_BURST = at_start
    choice = await screen.ask(modal)
    if choice is None:
        screen.notice("the open fork is kept; you will be asked again next time")
        return
    await screen.until_started()  # offered before start-up finished
    if not session.ready:
        screen.notice("the workspace could not be opened: the fork stays open", "error")
        return
    coordinator = await asyncio.to_thread(session.adopt_recovered, choice[1])
    if coordinator is None:
        screen.notice(f"fork {choice[1]} could not be recovered", "error")
        return
    for problem in coordinator.recovery_errors:
        screen.notice(problem, "warning")
    if choice[0] == "abort":
        await session.abort_fork()
        screen.notice(f"fork {choice[1]} aborted; no file changed")
        return
    if choice[0] == "merge" and len(choice) > 2 and choice[2]:
        # imported only now: it loads pydantic-ai, which start-up may be importing meanwhile
        from branching_core import MergeAction

        from ..merge.screen_flow import apply_merge

        await apply_merge(screen, MergeAction.pick(choice[2]))
        if not session.fork_active:
            return  # merged; else (a conflict) the fork is shown, still open
    await screen.fork_view.open(coordinator)
    screen.notice(f"fork {choice[1]} reopened: /merge to pick a winner")
