"""The multi-level patterns: TreeOfThoughts and BeamSearch.

Both keep the chosen nodes' branches open while they expand them (children are
nested branches of their node), and commit exactly one chain at the end: the best
leaf into its parent, that into its parent, ... into the workspace. Every other
branch is aborted first, so no beam ever receives two children, and the reported
winner is the leaf whose chain is what the workspace now holds.

``expand(path, depth)`` gets the open branch of the node to refine and the depth
of the children it should return (1 for the first refinement) and returns a list
of candidates ``fn(path)``. ``max_depth`` counts levels including the first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from branching_core.errors import BranchingError, InvalidArgumentError
from branching_core.patterns._runner import READY, Attempt, CandidateScheduler, Job, rank
from branching_core.patterns.basic import _Pattern
from branching_core.patterns.result import ABORTED, COMMITTED, FAILED

Expand = Callable[[Path, int], Sequence[Callable[[Path], Any]]]


def _lineage(runner: CandidateScheduler, att: Attempt) -> list[Attempt]:
    """``att`` and its ancestors, root first."""
    chain = [att]
    while chain[-1].result.parent_index is not None:
        chain.append(runner.attempts[chain[-1].result.parent_index])
    return chain[::-1]


def _prune(runner: CandidateScheduler, keep: Sequence[Attempt]) -> None:
    """Abort every open candidate that is neither in ``keep`` nor an ancestor of one."""
    live = {id(a) for node in keep for a in _lineage(runner, node)}
    for att in sorted(runner.attempts, key=lambda a: -a.result.depth):
        if att.result.status == READY and id(att) not in live:
            runner.discard(att, ABORTED)


def _commit_chain(runner: CandidateScheduler, leaf: Attempt) -> Attempt | None:
    chain = _lineage(runner, leaf)
    _prune(runner, [leaf])
    try:
        for att in reversed(chain):
            att.branch.commit()
    except BranchingError as exc:
        for att in chain:
            runner.discard(att, FAILED)
            att.result.success = False
            att.result.exception = exc
        return None
    for att in chain:
        att.result.status = COMMITTED
        runner._emit(att)
    return leaf


def _expand_jobs(expand: Expand, node: Attempt, depth: int) -> list[Job]:
    return [
        Job(fn=fn, parent=node.branch, depth=depth, parent_index=node.result.branch_index)
        for fn in expand(node.branch.path, depth)
    ]


class TreeOfThoughts(_Pattern):
    """Run strategies, keep the best, refine it with ``expand`` down to ``max_depth``.

    At each level the best successful child replaces the node; if no child
    succeeds, the search stops and the node reached so far is committed.
    """

    prefix = "tot"
    needs_local_trees = True

    def __init__(
        self,
        strategies: Sequence[Callable[[Path], Any]],
        *,
        expand: Expand | None = None,
        max_depth: int = 1,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        if max_depth < 1:
            raise InvalidArgumentError(f"max_depth must be at least 1, got {max_depth}")
        self.strategies = list(strategies)
        if not self.strategies:
            raise InvalidArgumentError("at least one strategy is needed")
        self.expand = expand
        self.max_depth = max_depth

    def _explore(self, runner: CandidateScheduler, parent: Any) -> Attempt | None:
        ranked = rank(runner.run(parent, [Job(fn=fn) for fn in self.strategies],
                                 first_wins=False))
        if not ranked:
            return None
        node = ranked[0]
        _prune(runner, [node])
        for depth in range(1, self.max_depth):
            left = runner.remaining()
            if self.expand is None or (left is not None and left <= 0):
                break
            jobs = _expand_jobs(self.expand, node, depth)
            if not jobs:
                break
            kids = rank(runner.run(parent, jobs, first_wins=False))
            if not kids:
                break
            node = kids[0]
            _prune(runner, [node])
        return _commit_chain(runner, node)


class BeamSearch(_Pattern):
    """Keep the ``beam_width`` best nodes per level; all children compete globally.

    Children of every beam are run together (each nested in its own beam's
    branch); the top ``beam_width`` successful ones become the next beams and the
    rest, with any beam left without a surviving child, are aborted. When a level
    produces no success the previous beams stand. The best final beam's chain is
    committed.
    """

    prefix = "beam"
    needs_local_trees = True

    def __init__(
        self,
        strategies: Sequence[Callable[[Path], Any]],
        *,
        expand: Expand,
        beam_width: int = 3,
        max_depth: int = 2,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        if beam_width < 1 or max_depth < 1:
            raise InvalidArgumentError("beam_width and max_depth must be at least 1")
        self.strategies = list(strategies)
        if not self.strategies:
            raise InvalidArgumentError("at least one strategy is needed")
        self.expand = expand
        self.beam_width = beam_width
        self.max_depth = max_depth
        self.levels: list[list[int]] = []

    def _explore(self, runner: CandidateScheduler, parent: Any) -> Attempt | None:
        beams = rank(runner.run(parent, [Job(fn=fn) for fn in self.strategies],
                                first_wins=False))[: self.beam_width]
        if not beams:
            return None
        _prune(runner, beams)
        self.levels.append([b.result.branch_index for b in beams])
        for depth in range(1, self.max_depth):
            left = runner.remaining()
            if left is not None and left <= 0:
                break
            jobs = [job for beam in beams for job in _expand_jobs(self.expand, beam, depth)]
            if not jobs:
                break
            kids = rank(runner.run(parent, jobs, first_wins=False))[: self.beam_width]
            if not kids:
                _prune(runner, beams)
                break
            beams = kids
            _prune(runner, beams)
            self.levels.append([b.result.branch_index for b in beams])
        return _commit_chain(runner, beams[0])


__all__ = ["BeamSearch", "TreeOfThoughts"]
