"""The merge picker's git options (issue 25): "merge and commit" and "export as branch",
and the git state line it shows.

Why apart from the picker: the picker only says what the user chose (a :class:`GitChoice`
instead of a plain ``MergeAction.pick(label)``); what that means (the pick with its
``GitCommitRequest`` for the engine's merge, or an export that lands nothing) is decided
here, beside the merge workflow.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from branching_core import GitCommitRequest, MergeAction

if TYPE_CHECKING:
    from branching_core.fork import MergeResult

    from ..session import ChatSession

GitMode = Literal["commit", "export"]


@dataclass(frozen=True)
class GitChoice:
    """The picker's "merge and commit" (``c``) or "export as branch" (``b``) on a branch."""

    action: MergeAction
    """The pick (``MergeAction.pick(label)``); its string form is parsed once, here."""
    mode: GitMode

    def __post_init__(self) -> None:
        object.__setattr__(self, "action", MergeAction.coerce(self.action))
        if self.action.kind != "pick" or self.action.label is None:
            raise ValueError(f"a git choice is a pick of one branch, not {self.action}")

    @property
    def label(self) -> str:
        assert self.action.label is not None  # a pick (checked above)
        return self.action.label


def git_line(root: Path | str, winner_paths: list[str] | None) -> str | None:
    """``git: on main at 1a2b3c4d, 2 other dirty files`` (``None`` outside a repository):
    "other" = outside the highlighted branch's paths."""
    from branching_core.gitops import repo_state

    state = repo_state(root)
    return state.line(winner_paths) if state is not None else None


def export_name(fork_id: str, label: str) -> str:
    """The branch "export as branch" makes: ``forkdeck/export/<fork>-<label>``."""
    from branching_core.gitops import ref_name

    return ref_name("export", f"{fork_id}-{label}").removeprefix("refs/heads/")


async def merge_and_commit(session: ChatSession, choice: GitChoice) -> MergeResult:
    """Merge the branch, then commit exactly the landed paths, the branch's test result
    (if the picker ran the tests) as the ``Forkdeck-Tests`` trailer: the pick carries its
    ``GitCommitRequest`` to the engine."""
    trailers = {}
    tests = (session.branch_tests or {}).get(choice.label)
    if tests:
        trailers["Tests"] = tests
    return await session.merge(
        replace(choice.action, git_commit=GitCommitRequest(trailers=trailers))
    )


async def export_branch(session: ChatSession, choice: GitChoice) -> str:
    """Make a git branch of the branch's change (nothing lands; the fork stays open);
    returns the one-line notice."""
    from branching_core.gitops import export_branch as export
    from branching_core.gitops import landing_message

    coordinator = session.coordinator
    if coordinator is None:
        raise RuntimeError("no fork is open")
    rt: Any = coordinator.get_branch(choice.label)
    branch = rt.ws_branch
    if branch is None:
        raise RuntimeError(f"branch {choice.label} has no workspace branch left")
    fork_id = coordinator.fork_id or "fork"
    name = export_name(fork_id, choice.label)
    message = landing_message(
        None,
        steer=rt.spec.steer,
        trailers={"Fork": fork_id, "Branch": choice.label, "Model": rt.spec.model or "default",
                  "Tests": (session.branch_tests or {}).get(choice.label) or "not run"},
    )

    def work() -> str:
        paths = branch.changes().all_paths
        commit = export(branch.path, coordinator.parent_path, paths, name, message)
        return f"exported {choice.label} as git branch {name} ({commit[:10]}); the fork stays open"

    return await asyncio.to_thread(work)


__all__ = ["GitChoice", "export_branch", "export_name", "git_line", "merge_and_commit"]
