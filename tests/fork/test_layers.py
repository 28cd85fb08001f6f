"""The fork layer works without the review layer; the public coordinator wires it in.

DESIGN.md's layers put ``review`` below ``fork`` (review imports fork types), so the fork
coordinator reaches the diff report and the judge only through ``ForkOptions.review``
(``fork/review_port.py``). ``lint-imports`` checks the static imports; these tests check
what actually happens at run time.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic_ai import Agent

import branching_core
from branching_core import live
from branching_core.fork import BranchSpec, ForkOptions
from branching_core.fork import ForkCoordinator as EngineCoordinator
from branching_core.review import BranchDiffReport, ReviewService

from .helpers import Scripted, call

ROOT = Path(__file__).resolve().parents[2]


def _writer() -> Agent:
    return Agent(Scripted({"A": [call("write_file", path="a.txt", content="a\n")]}).model)


async def test_public_coordinator_has_review_and_nested_forks_keep_it(ws, runner) -> None:
    assert branching_core.ForkCoordinator is live.ForkCoordinator
    coord = live.ForkCoordinator(_writer(), workspace=ws, command_runner=runner)
    assert isinstance(coord, EngineCoordinator)
    assert isinstance(coord.options.review, ReviewService)
    await coord.fork([BranchSpec("a", "A")], parent_history=[])
    await coord.wait(timeout=30)
    report = coord.diff_report()
    assert isinstance(report, BranchDiffReport)
    assert [p.path for p in report.paths] == ["a.txt"]
    inner = coord.nested("a")
    assert type(inner) is live.ForkCoordinator and inner.options.review is coord.options.review
    await coord.abort_fork()


async def test_a_given_review_service_is_kept(ws, runner) -> None:
    mine = ReviewService()
    coord = live.ForkCoordinator(_writer(), workspace=ws, options=ForkOptions(review=mine))
    assert coord.options.review is mine


async def test_fork_layer_coordinator_without_review_says_how_and_merges_nothing(
    ws, project: Path, runner
) -> None:
    coord = EngineCoordinator(_writer(), workspace=ws, command_runner=runner)
    await coord.fork([BranchSpec("a", "A")], parent_history=[])
    await coord.wait(timeout=30)
    with pytest.raises(RuntimeError, match="no review service"):
        coord.diff_report()
    with pytest.raises(RuntimeError, match="no review service"):
        coord.diff()
    with pytest.raises(RuntimeError, match="no review service"):
        await coord.merge_or_select("auto")
    assert not (project / "a.txt").exists() and not coord.is_resolved
    result = await coord.merge_or_select("pick:a")  # everything else works without review
    assert result.applied_paths == ["a.txt"] and (project / "a.txt").read_text() == "a\n"


def test_forking_with_the_mirror_never_loads_the_review_layer(tmp_path: Path) -> None:
    """A fork with the on-disk mirror, its merge and recover() run on the fork layer alone
    (the mirror used to live in review/, so this imported branching_core.review)."""
    project = tmp_path / "p"
    project.mkdir()
    (project / "x.txt").write_text("x\n")
    script = textwrap.dedent(
        f"""
        import asyncio, sys
        from pydantic_ai import Agent
        from pydantic_ai.messages import ModelResponse, TextPart
        from pydantic_ai.models.function import FunctionModel
        from branching_core.agent import LocalCommandRunner
        from branching_core.fork import BranchSpec, ForkCoordinator

        def done(messages, info):
            return ModelResponse(parts=[TextPart("done")])

        async def main():
            agent = Agent(FunctionModel(done))
            coord = ForkCoordinator(agent, workspace={str(project)!r}, materialize=True,
                                    command_runner=LocalCommandRunner())
            await coord.fork([BranchSpec("a", "A"), BranchSpec("b", "B")], parent_history=[])
            await coord.wait(timeout=30)
            coord.file_changes("a")
            await coord.merge_or_select("pick:a")
            await coord.flush()
            ForkCoordinator.recover({str(project)!r}, agent, materialize=True)
            loaded = sorted(m for m in sys.modules if m.startswith("branching_core.review"))
            print("REVIEW:", loaded)

        asyncio.run(main())
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert "REVIEW: []" in out.stdout, out.stdout
