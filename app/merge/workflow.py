"""``/merge`` as a plain class: the judge (under a judge strategy), accepting or overriding
its verdict, the picker's choice, and applying it, driven through the session's public
calls on the live coordinator.

Why no widget here: every decision of the merge (when the judge runs, what a committed
``auto`` merge means, what cancelling keeps, what a refused merge says) is testable with a
real coordinator and real agents and no mounted screen. The two questions to the user
(accept the verdict? which branch?) and the notices go through a :class:`MergeUI`; the
chat screen's is in ``app.merge.screen_flow``.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Protocol

from branching_core import MergeAction

from ..review.combine_flow import is_merge_result
from ..review.judge_record import judge_decided
from .git_choice import GitChoice, export_branch, merge_and_commit
from .outcome import build_report

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel

    from branching_core.fork import MergeResult

    from ..session import ChatSession

CANCELLED = "merge cancelled: the fork stays open"


class MergeUI(Protocol):
    """What the workflow asks the user, and where it says things."""

    def notice(self, text: str, severity: SeverityLevel = "information") -> None: ...

    async def accept(self, outcome: Any) -> str | None:
        """The judge's verdict (auto-eligible): ``"accept"``, ``"override"`` or None (cancel)."""
        ...

    async def pick(
        self, report: Any, statuses: list[Any], *, preselect: str | None, subtitle: str | None
    ) -> Any:
        """The winner as a :class:`MergeAction` (``MergeAction.pick(label)``), a combined merge's
        ``MergeResult`` already applied from the picker's explorer (17.1), or None (cancel)."""
        ...


class MergeWorkflow:
    """One ``/merge`` on ``session``'s open fork, asking ``ui``."""

    def __init__(self, session: ChatSession, ui: MergeUI) -> None:
        self.session = session
        self.ui = ui

    async def run(self) -> MergeResult | None:
        """Judge (unless the strategy is ``manual``), then accept or pick, then apply.

        Returns the merge's result, or None when nothing was merged (cancelled, refused,
        failed: the fork stays open and the notice says why).
        """
        coordinator = self.session.coordinator
        if coordinator is None:
            self.ui.notice("no fork is open: /fork first", "warning")
            return None
        handle = coordinator.handle
        strategy = handle.merge_strategy.kind if handle is not None else "manual"
        preselect: str | None = None
        subtitle: str | None = None
        outcome: Any = None
        if strategy != "manual":
            outcome = await self.judge()
            if outcome is not None and outcome.committed:
                # ``auto`` merged already, on our coordinator: the chat takes it over
                return self.session.adopt_merge(outcome.merge_result)
            if outcome is not None and outcome.auto_eligible:
                decision = await self.ui.accept(outcome)
                if decision is None:
                    self.ui.notice(CANCELLED)
                    await self.decided(outcome, None)
                    return None
                if decision == "accept":
                    accepted = MergeAction.pick(outcome.winner_label)
                    result = await self.apply(accepted)
                    await self.decided(outcome, accepted)
                    return result
            if outcome is not None:
                preselect = outcome.winner_label
                verdict = outcome.verdict
                subtitle = outcome.fallback_reason or (verdict.rationale if verdict else None)
        choice = await self.pick(preselect=preselect, subtitle=subtitle)
        if choice is None:
            self.ui.notice(CANCELLED)
            result = None
        elif is_merge_result(choice):
            result = choice  # a combination merged from the picker's explorer (17.1)
        elif isinstance(choice, GitChoice):
            result = await self.apply_git(choice)  # issue 25: merge+commit, or export
        else:
            result = await self.apply(choice)
        await self.decided(outcome, choice)
        return result

    async def decided(self, outcome: Any, choice: Any) -> None:
        """17.6: the user's accept/override/cancel of the judge's pick goes to the judge log
        (nothing when no verdict was shown or the merge failed)."""
        warning = await judge_decided(self.session, outcome, choice)
        if warning is not None:
            self.ui.notice(warning, "warning")

    async def judge(self) -> Any:
        """``branching_core.review.resolve`` on the fork; None (and a notice) when it cannot
        decide, so the user picks instead."""
        if (reason := self.session.judge_unavailable()) is not None:  # 13.24
            self.ui.notice(reason, "warning")
            return None
        self.ui.notice("asking the judge… (the branches are awaited first)")
        try:
            return await self.session.run_judge()
        except Exception as exc:
            self.ui.notice(f"the judge failed ({exc}): pick the winner yourself", "warning")
            return None

    async def pick(self, *, preselect: str | None = None, subtitle: str | None = None) -> Any:
        """The user's choice among the branches, shown with the diff report."""
        coordinator = self.session.coordinator
        if coordinator is None:
            self.ui.notice("no fork is open: /fork first", "warning")
            return None
        try:
            report = await build_report(self.session)
        except Exception as exc:
            self.ui.notice(f"cannot build the diff report: {exc}", "error")
            return None
        statuses = coordinator.inspect_branches()
        return await self.ui.pick(report, statuses, preselect=preselect, subtitle=subtitle)

    async def apply_git(self, choice: GitChoice) -> MergeResult | None:
        """The picker's "merge and commit" (the git outcome is a notice) or "export as
        branch" (nothing lands, the fork stays open: returns None)."""
        try:
            if choice.mode == "export":
                self.ui.notice(await export_branch(self.session, choice))
                return None
            result = await merge_and_commit(self.session, choice)
        except Exception as exc:
            self.ui.notice(f"{'export' if choice.mode == 'export' else 'merge'} failed: {exc}",
                           "error")
            return None
        if any("not committed" in line for line in result.git_notes):
            self.ui.notice("\n".join(result.git_notes), "warning")
        return result  # the merge summary lists the git notes too

    async def apply(self, action: MergeAction | str) -> MergeResult | None:
        """Merge as ``action`` says (its string form is parsed by ``MergeAction.coerce``);
        None (and the reason) when it did not happen."""
        try:
            action = MergeAction.coerce(action)
        except ValueError as exc:
            self.ui.notice(f"merge failed: {exc}", "error")
            return None
        label = action.label or ""
        coordinator = self.session.coordinator
        if coordinator is not None and action.kind == "pick":
            with contextlib.suppress(ValueError):
                if coordinator.get_branch(label).state == "running":
                    self.ui.notice(f"waiting for branch {label} to finish…")
        try:
            return await self.session.merge(action)
        except Exception as exc:
            self.ui.notice(f"merge failed: {exc}", "error")
            return None
