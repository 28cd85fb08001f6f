"""test_command in every branch: real pytest runs in the sandbox, concurrently."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from branching_core.review import run_branch_tests
from branching_core.review.branch_tests import parse_junit
from branching_core.workspace import Workspace

from .forks import call, fork_with, project

__all__ = ["project"]


@pytest.fixture(params=["auto", "copy"])
def ws(request: pytest.FixtureRequest, project: Path) -> Workspace:
    """Every behaviour on the automatic backend (overlay here) and on plain copies."""
    return Workspace(project, backend=request.param)


PYTEST = f"{sys.executable} -m pytest -q"
CALC = "def add(a, b):\n    return a + b\n"
GOOD = (
    "from calc import add\n\n"
    "def test_one():\n    assert add(1, 2) == 3\n\n"
    "def test_two():\n    assert add(0, 0) == 0\n"
)
BAD = GOOD.replace("== 3", "== 4")


async def three_branches(ws: Workspace, project: Path):
    (project / "calc.py").write_text(CALC)
    return await fork_with(
        ws,
        {
            "passes": [call("write_file", path="tests/test_calc.py", content=GOOD)],
            "fails": [call("write_file", path="tests/test_calc.py", content=BAD)],
            "empty": [call("write_file", path="notes.txt", content="no tests here\n")],
        },
    )


async def test_pytest_counts_come_from_junit(ws: Workspace, project: Path) -> None:
    coord = await three_branches(ws, project)
    before = {rt.label: rt.ws_branch.changes() for rt in coord.branches.values()}
    results = await run_branch_tests(coord.branches.values(), PYTEST, timeout=120)
    by_label = {r.label: r for r in results.values()}
    passes, fails, empty = by_label["passes"], by_label["fails"], by_label["empty"]

    assert (passes.source, passes.passed, passes.total, passes.collected) == ("junit", 2, 2, 2)
    assert passes.exit_code == 0 and passes.ok and passes.pass_ratio == 1.0

    assert (fails.source, fails.passed, fails.failed, fails.total) == ("junit", 1, 1, 2)
    assert fails.exit_code == 1 and not fails.ok and fails.pass_ratio == 0.5
    assert "assert 3 == 4" in fails.output_tail

    # zero tests collected is not a pass (pytest exits 5; the ratio is 0, not 1)
    assert (empty.source, empty.collected, empty.total, empty.exit_code) == ("junit", 0, 0, 5)
    assert not empty.ok and empty.pass_ratio == 0.0

    # the runs left the branches as they were (no __pycache__, .pytest_cache, junit file)
    after = {rt.label: rt.ws_branch.changes() for rt in coord.branches.values()}
    assert after == before
    assert not list(project.rglob("*.xml")) and not (project / ".pytest_cache").exists()
    await coord.abort_fork()


async def test_in_place_runs_leave_no_cache_in_the_branch(ws: Workspace, project: Path) -> None:
    coord = await three_branches(ws, project)
    before = {rt.label: rt.ws_branch.changes() for rt in coord.branches.values()}
    results = await run_branch_tests(coord.branches.values(), PYTEST, timeout=120, scratch=False)
    assert {r.label: (r.passed, r.total) for r in results.values()} == {
        "passes": (2, 2),
        "fails": (1, 2),
        "empty": (0, 0),
    }
    assert {rt.label: rt.ws_branch.changes() for rt in coord.branches.values()} == before
    await coord.abort_fork()


async def test_other_commands_use_the_exit_code(ws: Workspace, project: Path) -> None:
    coord = await three_branches(ws, project)
    results = await run_branch_tests(coord.branches.values(), "test -f tests/test_calc.py")
    by_label = {r.label: r for r in results.values()}
    assert {k: (r.source, r.passed, r.total) for k, r in by_label.items()} == {
        "passes": ("exit_code", 1, 1),
        "fails": ("exit_code", 1, 1),
        "empty": ("exit_code", 0, 1),
    }
    assert by_label["empty"].exit_code == 1 and by_label["empty"].pass_ratio == 0.0
    await coord.abort_fork()


async def test_timeout_gives_no_evidence(ws: Workspace, project: Path) -> None:
    coord = await fork_with(ws, {"slow": [call("write_file", path="x.txt", content="x")]})
    results = await run_branch_tests(coord.branches.values(), "sleep 30", timeout=0.5)
    (result,) = results.values()
    assert result.timed_out and result.source == "none" and result.pass_ratio is None
    assert result.duration_s < 30
    await coord.abort_fork()


async def test_empty_command_is_refused(ws: Workspace) -> None:
    coord = await fork_with(ws, {"a": [call("write_file", path="x.txt", content="x")]})
    with pytest.raises(ValueError, match="empty"):
        await run_branch_tests(coord.branches.values(), "  ")
    await coord.abort_fork()


def test_parse_junit() -> None:
    xml = (
        b'<?xml version="1.0"?><testsuites><testsuite name="a" tests="5" failures="1" '
        b'errors="1" skipped="1"/><testsuite name="b" tests="2" failures="0" errors="0" '
        b'skipped="0"/></testsuites>'
    )
    counts = parse_junit(xml)
    assert counts is not None
    assert (counts.tests, counts.passed, counts.executed) == (7, 4, 6)
    assert parse_junit(b"") is None and parse_junit(b"<not xml") is None
    assert parse_junit(b"<testsuite tests='x'/>") is None
