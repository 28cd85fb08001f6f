"""The merge workflow on the chat screen: its questions as the acceptance modal and the
merge picker, and what the screen does after a merge (fork view closed, the winner's turns
appended to the transcript, the summary notice, the chat saved for ``--resume``).

Why apart from ``workflow``: this is the only part that needs a mounted screen.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..fork.view import lazy
from .outcome import merge_summary
from .workflow import MergeWorkflow

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel

    from branching_core import MergeAction
    from branching_core.fork import MergeResult

    from .ports import MergeHost


class ScreenMergeUI:
    """:class:`app.merge.workflow.MergeUI` on ``screen``: modals and notices."""

    def __init__(self, screen: MergeHost) -> None:
        self.screen = screen

    def notice(self, text: str, severity: SeverityLevel = "information") -> None:
        self.screen.notice(text, severity)

    async def accept(self, outcome: Any) -> str | None:
        """The acceptance modal (it also handles ``d`` for the diff)."""
        modal_cls = lazy("forkdeck.merge.merge_acceptance", "MergeAcceptanceModal")
        session = self.screen.session
        coordinator = session.coordinator
        statuses = coordinator.inspect_branches() if coordinator is not None else []
        return await self.screen.ask(
            modal_cls(
                outcome,
                statuses=statuses,
                paths=session.diff_paths(),
                difftool=session.settings.difftool,
            )
        )

    async def pick(
        self, report: Any, statuses: list[Any], *, preselect: str | None, subtitle: str | None
    ) -> Any:
        picker_cls = lazy("forkdeck.merge.merge_picker", "MergePickerModal")
        session = self.screen.session
        detected = await lazy("forkdeck.review.detected_tests", "session_tests")(session)  # 17.4
        return await self.screen.ask(
            picker_cls(
                report,
                statuses,
                difftool=session.settings.difftool,
                paths=session.diff_paths(),  # the fork's live mirror (issue 13.6)
                preselect=preselect,
                subtitle=subtitle,
                coordinator=session.coordinator,  # live columns, "s" stop+merge (13.11, 13.10)
                branch_tests=session.branch_tests,
                test_command=session.settings.test_command,
                combiner=lazy("forkdeck.review.combine_flow", "live_combiner")(session),  # 17.1
                detected_tests=detected,
            )
        )


def workflow(screen: MergeHost) -> MergeWorkflow:
    return MergeWorkflow(screen.session, ScreenMergeUI(screen))


def start_merge(screen: MergeHost) -> None:
    """``/merge``: the workflow in a worker (its modals wait for the user)."""
    screen.run_worker(_merge(screen), group="merge", exclusive=True)


async def _merge(screen: MergeHost) -> None:
    result = await workflow(screen).run()
    if result is not None:
        await after_merge(screen, result)


async def apply_merge(screen: MergeHost, action: MergeAction) -> None:
    """Merge as ``action`` says without asking (a recovered fork's chosen branch)."""
    result = await workflow(screen).apply(action)
    if result is not None:
        await after_merge(screen, result)


async def after_merge(screen: MergeHost, result: MergeResult) -> None:
    screen.fork_view.close()
    screen.turns.save_history()
    # Append the winner's new turns: notices and command output stay (issue 13.12).
    screen.messages.append_history(screen.session.merged_messages)
    screen.notice(*merge_summary(result))
