"""The tools' finer behaviour over a real stdio session: explore, timeouts, bounded
output, limits, renames in diffs, the diff resource, concurrent runs."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.mcp.conftest import call, call_error, leftovers, snapshot, stdio_session, wait_until

FIXED = "def add(a, b):\n    return a + b\n"
TEST = "python3 -c 'import sys; sys.path.insert(0, \"src\"); import calc; " \
       "assert calc.add(2, 3) == 5'"


def _write(text: str) -> str:
    return f"printf '%s' '{text}' > src/calc.py"


async def test_explore_first_success_commits_the_candidate_that_passes_the_test(
        ws: Path) -> None:
    async with stdio_session(ws) as session:
        stale = await call(session, "branch_create", name="before")
        result = await call(
            session, "explore",
            commands=[_write("def add(a, b):\n    return a * b\n"), _write(FIXED),
                      "exit 3"],
            mode="first_success", test=TEST)
        assert result["committed"] and result["winner"] == 1, result
        by_index = {c["index"]: c for c in result["candidates"]}
        assert by_index[1]["status"] == "committed" and by_index[1]["exit_code"] == 0
        assert not by_index[0]["success"] and not by_index[2]["success"]
        assert by_index[2]["exit_code"] == 3
        assert (ws / "src" / "calc.py").read_text() == FIXED
        # a branch made before the winner landed is now stale: first winner rule
        Path(stale["path"], "late.txt").write_text("late")
        assert "conflict" in (await call_error(session, "branch_commit", label="before"))
    assert not (ws / "late.txt").exists()
    assert wait_until(lambda: leftovers(ws) == []), leftovers(ws)


async def test_explore_best_score_and_dry_run(ws: Path) -> None:
    before = snapshot(ws)
    commands = [f"echo {i} > pick.txt; echo {score} >&3" for i, score in
                enumerate((0.2, 0.9, 0.5))]
    async with stdio_session(ws) as session:
        dry = await call(session, "explore", commands=commands, mode="best_score",
                         commit=False)
        assert dry["winner"] == 1 and not dry["committed"]
        assert [c["score"] for c in sorted(dry["candidates"], key=lambda c: c["index"])] == [
            0.2, 0.9, 0.5]
        assert snapshot(ws) == before, "commit=false must land nothing"
        none = await call(session, "explore", commands=["exit 1", "false"],
                          mode="first_success")
        assert none["winner"] is None and not none["committed"]
        assert snapshot(ws) == before
        real = await call(session, "explore", commands=commands, mode="best_score")
        assert real["committed"] and real["winner"] == 1
    assert (ws / "pick.txt").read_text() == "1\n"


async def test_run_timeout_output_bounds_and_limits(ws: Path) -> None:
    async with stdio_session(ws) as session:
        await call(session, "branch_create", name="r")
        slow = await call(session, "branch_run", label="r", command="sleep 30",
                          timeout_s=0.5)
        assert slow["timed_out"] and slow["exit_code"] != 0 and "timeout" in slow["note"]
        loud = await call(session, "branch_run", label="r",
                          command="python3 -c 'print(\"x\" * 200000)'; echo tail-marker")
        assert len(loud["stdout"]) <= 16_000 and "characters cut" in loud["stdout"]
        assert loud["stdout"].rstrip().endswith("tail-marker") and "cut" in loud["note"]
        capped = await call(
            session, "branch_run", label="r", limits={"pids": 8},
            command="for i in $(seq 30); do sleep 2 & done; wait; echo all-started")
        assert capped["exit_code"] != 0 and "all-started" not in capped["stdout"], capped
        assert "fork" in capped["stderr"].lower(), capped
        free = await call(session, "branch_run", label="r", limits={"pids": 512},
                          command="for i in $(seq 30); do sleep 0.2 & done; wait; echo ok")
        assert free["exit_code"] == 0 and free["stdout"] == "ok\n"


async def test_diff_reports_renames_and_binaries_and_serves_a_resource(ws: Path) -> None:
    async with stdio_session(ws) as session:
        b = await call(session, "branch_create", name="d")
        await call(session, "branch_run", label="d",
                   command="mv README.md GUIDE.md && rm src/calc.py && "
                           "printf '\\000\\001' > blob.bin")
        diff = await call(session, "branch_diff", label="d")
        kinds = {(c["path"], c["status"], c["old_path"]) for c in diff["changes"]}
        assert kinds == {("GUIDE.md", "renamed", "README.md"), ("blob.bin", "created", None),
                         ("src/calc.py", "deleted", None)}
        assert "rename from README.md" in diff["diff"]
        assert "Binary or large files /dev/null and b/blob.bin differ" in diff["diff"]
        assert "-    return a - b" in diff["diff"]
        resource = await session.read_resource("forkdeck://branches/d/diff")
        text = "".join(getattr(c, "text", "") for c in resource.contents)
        assert "rename from README.md" in text
        assert Path(b["path"], "GUIDE.md").exists()


async def test_concurrent_runs_in_two_branches(ws: Path) -> None:
    async with stdio_session(ws) as session:
        await call(session, "branch_create", name="p")
        await call(session, "branch_create", name="q")
        # the same file name, written at the same time: each branch sees only its own
        p, q = await asyncio.gather(
            call(session, "branch_run", label="p", timeout_s=60,
                 command="echo p > out.txt; sleep 0.5; cat out.txt"),
            call(session, "branch_run", label="q", timeout_s=60,
                 command="echo q > out.txt; sleep 0.5; cat out.txt"),
        )
        assert (p["stdout"], q["stdout"]) == ("p\n", "q\n")
    assert not (ws / "out.txt").exists()


async def test_a_path_changed_in_the_workspace_meanwhile_is_a_conflict(ws: Path) -> None:
    async with stdio_session(ws) as session:
        b = await call(session, "branch_create", name="late")
        Path(b["path"], "README.md").write_text("branch version\n")
        (ws / "README.md").write_text("someone else's edit\n")  # the user, meanwhile
        text = await call_error(session, "branch_commit", label="late")
        assert "conflict:" in text and "README.md" in text, text
        assert (ws / "README.md").read_text() == "someone else's edit\n"
        listed = [r["label"] for r in (await call(session, "branch_list"))["branches"]]
        if listed:  # still open for inspection: it says so, and abort works
            assert "still open" in text and listed == ["late"]
            await call(session, "branch_abort", label="late")
    assert (ws / "README.md").read_text() == "someone else's edit\n"
