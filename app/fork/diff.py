"""``/fork diff [PATH]``: the external diff tool on the fork's live mirror when one is
detected, else the diff explorer screen.

Why apart: it is the one fork command that reads every branch's files (the diff report,
built off the event loop) and chooses between an outside program and a screen of ours.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..merge.outcome import build_report
from .view import lazy

if TYPE_CHECKING:
    from .ports import ForkHost


def fork_diff(screen: ForkHost, path: str | None) -> None:
    screen.run_worker(fork_diff_now(screen, path), group="diff")


async def fork_diff_now(screen: ForkHost, path: str | None) -> None:
    launch = lazy("forkdeck.review.merge_diff", "launch_difftool")
    explorer_cls = lazy("forkdeck.review.diff_explorer", "DiffExplorerScreen")
    session = screen.session
    try:
        report = await build_report(session, [path] if path else None)
    except Exception as exc:
        screen.notice(f"cannot build the diff report: {exc}", "error")
        return
    if path is not None and not any(e.path == path and e.touched_by for e in report.paths):
        screen.notice(f"no branch touched {path}", "warning")
        return
    paths = session.diff_paths()  # the fork's live mirror (issue 13.6)
    difftool = session.settings.difftool
    coordinator = session.coordinator
    source = "forkdeck.review.detected_tests"  # 17.4: which test command the review runs
    tests = lazy(source, "describe_tests")(await lazy(source, "session_tests")(session))
    screen.notice(tests)
    if paths is not None and coordinator is not None:  # a mirror exists only for a fork
        labels = [s.label for s in coordinator.inspect_branches()]
        if path is not None:
            entry = next(e for e in report.paths if e.path == path and e.touched_by)
            parent, branch_files = paths.for_entry(entry, labels)
        else:
            parent, branch_files = paths.parent, [paths.branches[k] for k in paths.branches]
        try:
            outcome = launch(parent, branch_files, difftool=difftool)
        except Exception as exc:
            screen.notice(f"cannot start the diff tool: {exc}", "error")
            return
        if not outcome.wants_tui:
            screen.notice(f"opened {outcome.kind} diff tool")
            return
    flow = "forkdeck.review.combine_flow"  # 17.1/17.3: combine and process view
    result = await screen.ask(
        explorer_cls(
            report,
            paths=paths,
            difftool=difftool,
            initial_path=path,
            combiner=lazy(flow, "live_combiner")(session),
            process=lazy(flow, "process_source")(session),
            tests_line=tests,
        )
    )
    if lazy(flow, "is_merge_result")(result):  # the explorer merged a combination
        await lazy("forkdeck.merge.screen_flow", "after_merge")(screen, result)
