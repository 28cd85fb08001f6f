"""Each pattern's own logic: scoring, rollouts, critique, depth, beams, judge, waves."""

from __future__ import annotations

from pathlib import Path

import pytest

from branching_core.patterns import (
    BeamSearch,
    BestOfN,
    Cascaded,
    Reflexion,
    Speculate,
    Tournament,
    TreeOfThoughts,
)
from branching_core.workspace import Workspace
from tests.patterns.conftest import files


def _writer(name: str, result: object):
    def candidate(path: Path) -> object:
        (path / name).write_text(name)
        return result

    return candidate


def test_scoring_order_tuple_then_scores_then_default(copy_ws: Workspace) -> None:
    outcome = BestOfN(
        [_writer("a", (True, 0.2)), _writer("b", True), _writer("c", False)],
        scores=[0.9, 0.5, 1.0],
    )(copy_ws)
    assert [r.score for r in outcome.all_results] == [0.2, 0.5, 0.0]
    assert outcome.winner is not None and outcome.winner.branch_index == 1
    assert files(copy_ws) == {"base.txt", "b"}
    plain = BestOfN([_writer("d", True), _writer("e", False)])(copy_ws)
    assert [r.score for r in plain.all_results] == [1.0, 0.0]


def test_evaluate_comes_first(ws: Workspace) -> None:
    def evaluate(path: Path) -> float:
        return float((path / "q").read_text())

    def cand(q: str, own: float):
        def run(path: Path) -> tuple[bool, float]:
            (path / "q").write_text(q)
            return True, own

        return run

    outcome = BestOfN([cand("0.1", 0.9), cand("0.8", 0.0)], evaluate=evaluate)(ws)
    assert [r.score for r in outcome.all_results] == [0.1, 0.8]
    assert (ws.path / "q").read_text() == "0.8"


def test_best_of_n_task_form_and_rollouts(ws: Workspace) -> None:
    def task(path: Path, attempt: int) -> tuple[bool, float]:
        (path / f"r{attempt}").write_text("x")
        return attempt != 1, attempt / 10

    outcome = BestOfN(task, n=3, commit=False)(ws)
    # The best success is reported as the winner, uncommitted (BranchContext 0.3.0).
    assert not outcome.committed
    assert outcome.winner is outcome.all_results[2]
    assert outcome.winner is not None
    assert outcome.winner.status == "aborted" and outcome.winner.success
    assert outcome.winner.node_id is None
    assert [(r.status, r.success, r.score) for r in outcome.all_results] == [
        ("aborted", True, 0.0), ("failed", False, 0.1), ("aborted", True, 0.2)]
    assert files(ws) == {"base.txt"}


def test_speculate_without_first_wins_commits_lowest_index_success(copy_ws: Workspace) -> None:
    outcome = Speculate([_writer("x", False), _writer("y", True), _writer("z", True)],
                        first_wins=False)(copy_ws)
    assert [r.status for r in outcome.all_results] == ["failed", "committed", "aborted"]
    assert files(copy_ws) == {"base.txt", "y"}


def test_reflexion_feeds_the_critique_of_the_failed_branch(ws: Workspace) -> None:
    seen: list[tuple[int, str | None]] = []

    def task(path: Path, attempt: int, feedback: str | None) -> bool:
        seen.append((attempt, feedback))
        (path / "log.txt").write_text(f"attempt {attempt}")
        (path / "feedback.txt").write_text(str(feedback))
        return attempt == 2

    def critique(path: Path) -> str:  # reads what the failed attempt left in its branch
        return "critique of " + (path / "log.txt").read_text()

    outcome = Reflexion(task, max_retries=4, critique=critique)(ws)
    assert seen == [(0, None), (1, "critique of attempt 0"), (2, "critique of attempt 1")]
    assert [r.status for r in outcome.all_results] == ["failed", "failed", "committed"]
    assert (ws.path / "feedback.txt").read_text() == "critique of attempt 1"


def test_reflexion_without_critique_feeds_the_failure(copy_ws: Workspace) -> None:
    def task(path: Path, attempt: int, feedback: str | None) -> bool:
        if attempt == 0:
            raise ValueError("first try broke")
        (path / "fb").write_text(str(feedback))
        return False

    outcome = Reflexion(task, max_retries=2, timeout=10)(copy_ws)
    assert not outcome.committed
    assert [r.status for r in outcome.all_results] == ["failed", "failed"]
    assert isinstance(outcome.all_results[0].exception, ValueError)


def test_tree_of_thoughts_expands_the_best_across_depths(ws: Workspace) -> None:
    calls: list[tuple[set[str], int]] = []

    def expand(path: Path, depth: int):
        calls.append(({p.name for p in path.iterdir()}, depth))
        return [_writer(f"d{depth}-lo", (True, 0.1)), _writer(f"d{depth}-hi", (True, 0.7))]

    outcome = TreeOfThoughts(
        [_writer("weak", (True, 0.3)), _writer("strong", (True, 0.6))],
        expand=expand, max_depth=3,
    )(ws)
    assert [depth for _, depth in calls] == [1, 2]
    assert "strong" in calls[0][0] and "d1-hi" in calls[1][0]
    assert files(ws) == {"base.txt", "strong", "d1-hi", "d2-hi"}
    assert outcome.winner is not None and outcome.winner.depth == 2
    committed = [r.branch_index for r in outcome.all_results if r.status == "committed"]
    assert committed == [1, 3, 5]


def test_beam_search_never_commits_two_children_into_one_beam(ws: Workspace) -> None:
    def expand(path: Path, depth: int):
        names = {p.name for p in path.iterdir()}
        if "A" in names:  # both of A's children beat B's, so both survive the level
            return [_writer("A1", (True, 0.9)), _writer("A2", (True, 0.8))]
        return [_writer("B1", (True, 0.1))]

    search = BeamSearch(
        [_writer("A", (True, 0.5)), _writer("B", (True, 0.4)), _writer("C", (True, 0.1))],
        expand=expand, beam_width=2, max_depth=2,
    )
    outcome = search(ws)
    assert files(ws) == {"base.txt", "A", "A1"}
    assert outcome.winner is not None
    assert outcome.winner.return_value == (True, 0.9)
    assert outcome.winner.parent_index == 0 and outcome.winner.depth == 1
    by_index = {r.branch_index: r for r in outcome.all_results}
    assert search.levels == [[0, 1], [3, 4]]
    assert by_index[4].status == "aborted" and by_index[1].status == "aborted"
    assert by_index[2].status == "aborted"  # pruned at level 0
    assert {r.status for r in outcome.all_results} <= {"committed", "aborted"}


def test_beam_search_keeps_previous_level_when_children_fail(copy_ws: Workspace) -> None:
    outcome = BeamSearch([_writer("A", (True, 0.5))], expand=lambda p, d: [_writer("x", False)],
                         beam_width=1, max_depth=3)(copy_ws)
    assert files(copy_ws) == {"base.txt", "A"}
    assert outcome.winner is not None and outcome.winner.branch_index == 0


def test_tournament_pairwise_judge(ws: Workspace) -> None:
    def task(path: Path, index: int) -> bool:
        (path / "value").write_text(str([3, 9, 1, 5, 7][index]))
        return index != 2

    def judge(a: Path, b: Path) -> int:
        return 0 if int((a / "value").read_text()) >= int((b / "value").read_text()) else 1

    t = Tournament(task, n=5, judge=judge)
    outcome = t(ws)
    assert (ws.path / "value").read_text() == "9"
    assert outcome.winner is not None and outcome.winner.branch_index == 1
    assert t.rounds[0] == [(0, 1, 1), (3, 4, 4)]
    assert [r.status for r in outcome.all_results] == [
        "aborted", "committed", "failed", "aborted", "aborted"]


def test_tournament_list_form_and_bad_judge_leaves_nothing_open(copy_ws: Workspace) -> None:
    with pytest.raises(ValueError, match="judge must return 0 or 1"):
        Tournament([_writer("a", True), _writer("b", True)], judge=lambda a, b: 7)(copy_ws)
    assert files(copy_ws) == {"base.txt"}


def test_cascaded_waves_widen_with_error_feedback(ws: Workspace) -> None:
    def solve(path: Path, feedback: list[str]) -> tuple[bool, str]:
        (path / "seen.txt").write_text("|".join(feedback))
        if len(feedback) >= 3:
            return True, ""
        return False, f"error after {len(feedback)}"

    c = Cascaded(solve, fan_out=(1, 2, 4), timeout=20)
    outcome = c(ws)
    assert outcome.committed
    assert [len(w) for w in c.waves] == [1, 2, 4]
    assert (ws.path / "seen.txt").read_text() == "error after 0|error after 1|error after 1"
    statuses = [r.status for r in outcome.all_results]
    assert statuses[:3] == ["failed"] * 3
    assert statuses.count("committed") == 1
    assert set(statuses[3:]) <= {"committed", "lost_race"}


def test_cascaded_drops_empty_errors_and_stops_after_last_wave(copy_ws: Workspace) -> None:
    def solve(path: Path, feedback: list[str]) -> tuple[bool, str]:
        assert feedback == []
        return False, ""

    outcome = Cascaded(solve, fan_out=(1, 2))(copy_ws)
    assert not outcome.committed and len(outcome.all_results) == 3


def test_constructor_validation() -> None:
    with pytest.raises(ValueError):
        BestOfN([lambda p: True], scores=[1.0, 2.0])
    with pytest.raises(ValueError):
        Speculate([lambda p: True], timeout=0)(None)
    with pytest.raises(ValueError):
        Cascaded(lambda p, f: True, fan_out=(1, 0))


def test_best_of_n_commit_false_without_a_success_has_no_winner(copy_ws: Workspace) -> None:
    outcome = BestOfN(lambda path, i: False, n=2, commit=False)(copy_ws)
    assert not outcome.committed and outcome.winner is None
    assert [r.status for r in outcome.all_results] == ["failed", "failed"]


def test_every_pattern_takes_an_explicit_local_runner(copy_ws: Workspace) -> None:
    from branching_core.patterns import LocalRunner, Runner

    runner = LocalRunner()
    assert isinstance(runner, Runner)
    outcome = Speculate([_writer("x", True)], runner=runner)(copy_ws)
    assert outcome.committed and files(copy_ws) == {"base.txt", "x"}
    assert outcome.winner is not None and outcome.winner.node_id is None


def test_patterns_that_read_trees_locally_refuse_a_remote_runner() -> None:
    from branching_core.patterns import Tournament

    class Remote:  # any runner that says its trees live elsewhere
        remote = True

        def session(self, parent: object, **kw: object) -> None:
            raise AssertionError("never opened")

    with pytest.raises(ValueError, match="cannot use"):
        Tournament([_writer("x", True)], judge=lambda a, b: 0, runner=Remote())
