"""One ``ForkCoordinator``, typed all the way to the review layer below it (issue 23).

The review layer (diff report, process report, judge) sits *below* fork in DESIGN.md's
layers since issue 23: the coordinator calls it directly, so there is no ``Any``-typed
port and no second class of the same name that wires a default review in. ``lint-imports``
checks the static imports; these tests check what actually happens at run time: the
coordinator the fork layer builds is the public one and reports without being given
anything, and a fork that is only run and merged by hand still never loads the judge.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from pydantic_ai import Agent

import branching_core
from branching_core import fork, live
from branching_core.fork import BranchSpec, ForkCoordinator
from branching_core.review import BranchDiffReport, ProcessReport

from .helpers import Scripted, call

ROOT = Path(__file__).resolve().parents[2]


def _writer() -> Agent:
    return Agent(Scripted({"A": [call("write_file", path="a.txt", content="a\n")]}).model)


def test_there_is_one_fork_coordinator() -> None:
    assert branching_core.ForkCoordinator is fork.ForkCoordinator is live.ForkCoordinator
    named = {
        cls
        for module in list(sys.modules.values())
        if (getattr(module, "__name__", "") or "").startswith("branching_core")
        for cls in [getattr(module, "ForkCoordinator", None)]
        if isinstance(cls, type)
    }
    assert named == {ForkCoordinator}


async def test_the_fork_layer_coordinator_reports_and_nests_without_being_given_review(
    ws, project: Path, runner
) -> None:
    coord = ForkCoordinator(_writer(), workspace=ws, command_runner=runner)
    await coord.fork([BranchSpec("a", "A")], parent_history=[])
    await coord.wait(timeout=30)
    report = coord.diff_report()
    assert isinstance(report, BranchDiffReport)
    assert [p.path for p in report.paths] == ["a.txt"]
    assert coord.diff()["paths"][0]["path"] == "a.txt"
    process = coord.process_report()
    assert isinstance(process, ProcessReport)
    assert [s.tool for s in process.steps["a"]] == ["write_file"]
    inner = coord.nested("a")
    assert type(inner) is ForkCoordinator
    result = await coord.merge_or_select("pick:a")
    assert result.applied_paths == ["a.txt"] and (project / "a.txt").read_text() == "a\n"


def test_forking_with_the_mirror_never_loads_the_review_layer(tmp_path: Path) -> None:
    """A fork with the on-disk mirror, its merge and recover() never import the review layer
    (it is imported on first use: a diff report, a process report, a judge)."""
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
