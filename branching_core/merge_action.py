"""A merge choice as a typed value: pick a branch, combine a selection, abort (or let
the judge decide), with room for "and commit to git".

Why: the choice travelled as a string (``"pick:<label>"``) parsed wherever it arrived.
:class:`MergeAction` is what the coordinator's ``merge_or_select`` takes; the string form
is still accepted for compatibility and is parsed here, in :meth:`MergeAction.parse`,
and nowhere else in the engine. Front doors (the TUI, the model's merge tool, the CLI,
MCP) build a ``MergeAction`` and never format a string to be parsed again.

A shared leaf (errors only), like ``run_states``: the fork layer settles with it, and the
judge (``branching_core.review``, below fork) builds the pick it merges. The fork package
re-exports every name (``branching_core.fork.MergeAction``, ``fork.actions``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from branching_core.errors import BranchingError

MergeKind = Literal["pick", "combine", "abort", "auto"]

OnConflict = Literal["land_rest", "refuse"]
"""What a pick does with paths the parent changed since the fork: ``land_rest`` (the
default: those paths are left alone and reported, the rest lands) or ``refuse`` (nothing
lands, the fork stays open, ``ConflictError`` names the paths)."""


class MergeActionError(BranchingError, ValueError):
    """A merge action that is not one (an unknown word, a pick without a label, a
    combine without a selection, a request the engine cannot honour yet)."""


@dataclass(frozen=True)
class GitCommitRequest:
    """"And commit exactly the landed paths to git" after the landing (``fork.git_landing``):
    ``message`` None: a summary of the branch's steer with forkdeck trailers; ``branch``:
    commit on a new branch of that name instead of the current one."""

    message: str | None = None
    branch: str | None = None
    trailers: Mapping[str, str] = field(default_factory=dict[str, str])
    """Extra ``Forkdeck-<key>: value`` lines (e.g. ``{"Tests": "12/12 passed"}``)."""


@dataclass(frozen=True)
class MergeAction:
    """One way to end a fork (build it with :meth:`pick`, :meth:`combine`, :meth:`abort`
    or :meth:`auto`)."""

    kind: MergeKind
    label: str | None = None
    """``pick``: the branch's label (or id)."""
    selection: Mapping[str, str | Sequence[Any]] | None = None
    """``combine``: path -> branch label, ``"parent"`` or hunk choices (``fork.combine``)."""
    base: str | None = None
    """``combine``: whose history continues (default: the branch most paths came from)."""
    git_commit: GitCommitRequest | None = None
    """"And commit to git" (``GitCommitRequest``); None: no commit unless ``[git]
    commit_merges`` or the caller's ``git=`` asks for one."""
    on_conflict: OnConflict = "land_rest"
    """``pick``: what a path the parent changed since the fork does to the merge (the one
    conflict rule, ``workspace.changes.find_conflicts``): ``land_rest`` leaves those paths
    alone and lands the rest (the model's merge tool, the CLI); ``refuse`` lands nothing
    and raises ``ConflictError`` with the paths, the fork still open (the TUI, where the
    user picks again)."""

    @classmethod
    def pick(
        cls,
        label: str,
        *,
        git_commit: GitCommitRequest | None = None,
        on_conflict: OnConflict = "land_rest",
    ) -> MergeAction:
        label = label.strip()
        if not label:
            raise MergeActionError("pick needs a branch label or id")
        if on_conflict not in ("land_rest", "refuse"):
            raise MergeActionError(
                f"unknown on_conflict {on_conflict!r}: use 'land_rest' or 'refuse'"
            )
        return cls("pick", label=label, git_commit=git_commit, on_conflict=on_conflict)

    @classmethod
    def combine(
        cls,
        selection: Mapping[str, str | Sequence[Any]],
        *,
        base: str | None = None,
        git_commit: GitCommitRequest | None = None,
    ) -> MergeAction:
        return cls("combine", selection=dict(selection), base=base, git_commit=git_commit)

    @classmethod
    def abort(cls) -> MergeAction:
        return cls("abort")

    @classmethod
    def auto(cls) -> MergeAction:
        return cls("auto")

    @classmethod
    def parse(cls, text: str) -> MergeAction:
        """The string form: ``"pick:<label or id>"``, ``"combine"`` (its selection then
        comes as a keyword of ``merge_or_select``), ``"auto"`` or ``"abort"``."""
        word = text.strip()
        if word in ("abort", "auto"):
            return cls(word)
        if word == "combine":
            return cls("combine")
        if word.startswith("pick:"):
            return cls.pick(word[5:])
        raise MergeActionError(
            f"unknown action {text!r}: use 'pick:<label or id>', 'combine', 'auto' or 'abort'"
        )

    @classmethod
    def coerce(cls, action: MergeAction | str) -> MergeAction:
        return action if isinstance(action, MergeAction) else cls.parse(action)

    def __str__(self) -> str:
        """The string form (what events and the manifest record)."""
        return f"pick:{self.label}" if self.kind == "pick" else self.kind


__all__ = ["GitCommitRequest", "MergeAction", "MergeActionError", "MergeKind", "OnConflict"]
