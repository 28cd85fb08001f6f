"""The official MCP client over stdio against ``forkdeck mcp`` as a subprocess."""

from __future__ import annotations

from pathlib import Path

from mcp import ClientSession

from tests.mcp.conftest import (
    call,
    call_error,
    helper_pid,
    leftovers,
    mounts_under,
    pid_gone,
    processes_with,
    snapshot,
    stdio_session,
    store_of,
    wait_until,
)

TOOLS = {"branch_create", "branch_list", "branch_run", "branch_diff", "branch_commit",
         "branch_abort", "explore"}


async def two_branches_first_wins(session: ClientSession, ws: Path) -> None:
    """Shared by the stdio and HTTP tests: two branches, files written at their paths by
    this process (as a client's own file tool would), commands run in each, a diff, one
    commit, the other stale, and the workspace holding exactly the winner's files."""
    before = snapshot(ws)
    a = await call(session, "branch_create", name="fix-a")
    b = await call(session, "branch_create", name="fix-b")
    assert a["path"] != b["path"] and "private" in a["note"]
    # the client's own file tools: another process writes at the returned paths
    Path(a["path"], "src", "calc.py").write_text("def add(a, b):\n    return a + b\n")
    Path(a["path"], "NOTES.md").write_text("fixed by a\n")
    Path(b["path"], "src", "calc.py").write_text("def add(a, b):\n    return b + a\n")
    assert snapshot(ws) == before, "a branch's edits leaked into the workspace"

    test = "python3 -c 'import sys; sys.path.insert(0, \"src\"); import calc; " \
           "assert calc.add(2, 3) == 5; print(\"ok\", __import__(\"os\").getcwd())'"
    ran_a = await call(session, "branch_run", label="fix-a", command=test)
    ran_b = await call(session, "branch_run", label="fix-b", command=test)
    assert ran_a["exit_code"] == 0 and ran_b["exit_code"] == 0, (ran_a, ran_b)
    # the branch appears at the workspace's own path
    assert ran_a["stdout"].strip() == f"ok {ws.resolve()}"
    # writes by commands land in the branch, not the workspace
    await call(session, "branch_run", label="fix-b", command="echo built > build.log")
    assert not (ws / "build.log").exists()
    assert Path(b["path"], "build.log").read_text() == "built\n"

    listing = await call(session, "branch_list")
    rows = {r["label"]: r for r in listing["branches"]}
    assert set(rows) == {"fix-a", "fix-b"}
    assert rows["fix-a"]["changed"] == 2 and rows["fix-b"]["changed"] == 2

    diff = await call(session, "branch_diff", label="fix-a")
    assert {(c["path"], c["status"]) for c in diff["changes"]} == {
        ("NOTES.md", "created"), ("src/calc.py", "modified")}
    assert "-    return a - b" in diff["diff"] and "+    return a + b" in diff["diff"]
    only = await call(session, "branch_diff", label="fix-a", paths=["src"])
    assert [c["path"] for c in only["changes"]] == ["src/calc.py"]

    landed = await call(session, "branch_commit", label="fix-a")
    assert landed["committed"] and sorted(landed["created"]) == ["NOTES.md"]
    assert landed["modified"] == ["src/calc.py"]
    stale = await call_error(session, "branch_commit", label="fix-b")
    assert "conflict" in stale.lower(), stale
    # exactly the winner's files, nothing of the loser's
    after = snapshot(ws)
    assert (ws / "src" / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert (ws / "NOTES.md").read_text() == "fixed by a\n"
    assert not (ws / "build.log").exists()
    assert set(after) - set(before) == {"NOTES.md"}
    # the stale branch is gone, not left open
    assert (await call(session, "branch_list"))["branches"] == []
    unknown = await call_error(session, "branch_run", label="fix-b", command="true")
    assert "unknown branch" in unknown

    c = await call(session, "branch_create", name="scratch")
    Path(c["path"], "junk.txt").write_text("junk")
    aborted = await call(session, "branch_abort", label="scratch")
    assert aborted["aborted"] == ["scratch"]
    assert not (ws / "junk.txt").exists()


async def test_tools_are_listed_with_schemas(ws: Path) -> None:
    async with stdio_session(ws) as session:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == TOOLS
        assert set(tools["branch_create"].input_schema["properties"]) >= {"name", "parent"}
        assert set(tools["branch_run"].input_schema["properties"]) >= {
            "label", "command", "timeout_s", "limits"}
        assert set(tools["explore"].input_schema["properties"]) >= {
            "commands", "mode", "test", "commit"}
        assert all(t.output_schema for t in tools.values())
        assert all(t.description for t in tools.values())


async def test_two_branches_first_winner_over_stdio(ws: Path) -> None:
    async with stdio_session(ws) as session:
        await two_branches_first_wins(session, ws)
    assert wait_until(lambda: leftovers(ws) == []), leftovers(ws)


async def test_disconnect_with_open_branch_leaves_nothing(ws: Path) -> None:
    before = snapshot(ws)
    marker = "4321.987"
    async with stdio_session(ws) as session:
        opened = await call(session, "branch_create", name="open")
        nested = await call(session, "branch_create", name="inner", parent="open")
        Path(nested["path"], "wip.txt").write_text("wip")
        # a background process that would outlive a careless sandbox
        await call(session, "branch_run", label="inner",
                   command=f"(sleep {marker} &) ; echo started")
        helper = helper_pid(opened["path"])
    # the client disconnected: branches aborted, views, helper and processes gone
    assert wait_until(lambda: pid_gone(helper)), "the mount helper outlived its server"
    assert wait_until(lambda: processes_with(marker) == []), processes_with(marker)
    assert wait_until(lambda: leftovers(ws) == []), leftovers(ws)
    assert mounts_under(store_of(ws)) == []
    assert not Path(opened["path"]).exists()
    assert snapshot(ws) == before


async def test_nested_branch_commits_into_its_parent(ws: Path) -> None:
    async with stdio_session(ws) as session:
        outer = await call(session, "branch_create", name="outer")
        inner = await call(session, "branch_create", name="inner", parent="outer")
        Path(inner["path"], "deep.txt").write_text("deep")
        refused = await call_error(session, "branch_commit", label="outer")
        assert "open child" in refused
        landed = await call(session, "branch_commit", label="inner")
        assert landed["into"] == "outer"
        assert Path(outer["path"], "deep.txt").read_text() == "deep"
        assert not (ws / "deep.txt").exists()
        await call(session, "branch_commit", label="outer")
        assert (ws / "deep.txt").read_text() == "deep"
