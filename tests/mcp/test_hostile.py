"""Hostile arguments get one-line tool errors and change nothing; the server survives."""

from __future__ import annotations

from pathlib import Path

from tests.mcp.conftest import call, call_error, leftovers, snapshot, stdio_session, wait_until


async def test_bad_labels_commands_and_paths_change_nothing(ws: Path, tmp_path: Path) -> None:
    before = snapshot(ws)
    outside = tmp_path / "outside.txt"
    outside.write_text("secret\n")
    async with stdio_session(ws) as session:
        for bad in ("a/b", "../up", "..", "x\x00y", "", "-dash", "a" * 65, "/abs"):
            text = await call_error(session, "branch_create", name=bad)
            assert "name" in text
            await call_error(session, "branch_run", label=bad, command="true")
            await call_error(session, "branch_commit", label=bad)
            await call_error(session, "branch_abort", label=bad)
        b = await call(session, "branch_create", name="ok")
        huge = "echo " + "x" * (70 * 1024)
        assert "limit" in await call_error(session, "branch_run", label="ok", command=huge)
        assert "NUL" in await call_error(session, "branch_run", label="ok", command="echo \x00")
        assert await call_error(session, "branch_run", label="ok", command="   ")
        await call_error(session, "explore", commands=[huge], mode="first_success")
        await call_error(session, "explore", commands=[], mode="first_success")
        await call_error(session, "explore", commands=["true"] * 17, mode="best_score")
        await call_error(session, "explore", commands=["true"], mode="fastest")
        await call_error(session, "branch_run", label="ok", command="true", timeout_s=-1)
        await call_error(session, "branch_run", label="ok", command="true",
                         limits={"memory": "lots"})
        await call_error(session, "branch_run", label="ok", command="true",
                         limits={"gpu": 1})
        for path in (str(outside), "../outside.txt", "src/../../x", "a\x00b", "/etc/passwd",
                     ".pydantic-deep/mcp"):
            text = await call_error(session, "branch_diff", label="ok", paths=[path])
            assert "path" in text, text
        # absolute paths inside the branch (or the workspace as commands see it) are fine
        Path(b["path"], "src", "new.py").write_text("x = 1\n")
        inside = await call(session, "branch_diff", label="ok",
                            paths=[str(Path(b["path"]) / "src"), str(ws / "src" / "new.py")])
        assert [c["path"] for c in inside["changes"]] == ["src/new.py"]
        # the sandbox writes only the branch: the outside file is untouched
        await call(session, "branch_run", label="ok",
                   command=f"echo pwned > {outside} ; echo pwned > {ws}/README.md; true")
        assert outside.read_text() == "secret\n"
        assert (await call(session, "branch_list"))["branches"][0]["label"] == "ok"
        await call(session, "branch_abort", label="ok")
    assert snapshot(ws) == before
    assert wait_until(lambda: leftovers(ws) == []), leftovers(ws)


async def test_a_thousand_branches_hit_the_limit_and_change_nothing(ws: Path) -> None:
    before = snapshot(ws)
    async with stdio_session(ws, "--max-branches", "40") as session:
        made, refused = 0, 0
        for i in range(1000):
            result = await session.call_tool("branch_create", {"name": f"n{i}"})
            if result.is_error:
                refused += 1
                text = "".join(getattr(p, "text", "") for p in result.content)
                assert "limit of 40 open branches" in text
            else:
                made += 1
        assert (made, refused) == (40, 960)
        assert len((await call(session, "branch_list"))["branches"]) == 40
        # still serving: aborting one frees a slot
        await call(session, "branch_abort", label="n0")
        await call(session, "branch_create", name="again")
    assert snapshot(ws) == before
    assert wait_until(lambda: leftovers(ws) == []), leftovers(ws)


async def test_duplicate_and_unknown_labels(ws: Path) -> None:
    async with stdio_session(ws) as session:
        await call(session, "branch_create", name="twice")
        assert "already open" in await call_error(session, "branch_create", name="twice")
        assert "unknown" in await call_error(session, "branch_create", name="c", parent="nope")
        assert "unknown" in await call_error(session, "branch_diff", label="nope")
        auto = await call(session, "branch_create")
        assert auto["label"] == "b1"
