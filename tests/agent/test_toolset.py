"""Each workspace tool against a real directory, directly and through a real pydantic-ai Agent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent, ToolFailed
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from branching_core.agent import LocalCommandRunner, WorkspaceToolset, create_workspace_toolset
from branching_core.agent.toolset import glob_to_regex

from .conftest import snapshot


async def call_through_agent(toolset: WorkspaceToolset, tool: str, **args: Any) -> ToolReturnPart:
    """Have a scripted model call one tool, and return what the model got back."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart(tool, args)])
        return ModelResponse(parts=[TextPart("done")])

    result = await Agent(FunctionModel(model), toolsets=[toolset]).run("go")
    returns = [p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    assert len(returns) == 1
    return returns[0]


# -- tool registration ---------------------------------------------------------------------


async def test_toolset_offers_the_eight_tools_with_descriptions(tools: WorkspaceToolset) -> None:
    seen: dict[str, Any] = {}

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.update({t.name: t for t in info.function_tools})
        return ModelResponse(parts=[TextPart("ok")])

    await Agent(FunctionModel(model), toolsets=[tools]).run("list your tools")
    assert set(seen) == {
        "read_file",
        "write_file",
        "edit_file",
        "list_dir",
        "glob",
        "grep",
        "delete_file",
        "run_command",
    }
    edit = seen["edit_file"]
    assert "exactly once" in edit.parameters_json_schema["properties"]["old"]["description"]
    assert edit.sequential and seen["run_command"].sequential and not seen["read_file"].sequential


def test_root_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(NotADirectoryError):
        create_workspace_toolset(tmp_path / "missing")


# -- read / write / edit -------------------------------------------------------------------


def test_read_file(tools: WorkspaceToolset) -> None:
    assert tools.read_file("hello.txt") == "hello world\n"
    assert tools.read_file("src/app.py").startswith("def main():")


def test_read_file_window(tools: WorkspaceToolset, ws: Path) -> None:
    (ws / "long.txt").write_text("".join(f"line {i}\n" for i in range(1, 11)))
    out = tools.read_file("long.txt", offset=2, limit=3)
    assert out.splitlines()[:3] == ["line 3", "line 4", "line 5"]
    assert "lines 3-5 of 10" in out and "offset=5" in out


def test_read_file_errors(tools: WorkspaceToolset, ws: Path) -> None:
    (ws / "blob.bin").write_bytes(b"\x00\x01\x02")
    with pytest.raises(ToolFailed, match="does not exist"):
        tools.read_file("nope.txt")
    with pytest.raises(ToolFailed, match="directory"):
        tools.read_file("src")
    with pytest.raises(ToolFailed, match="binary"):
        tools.read_file("blob.bin")


def test_write_file_creates_parents_and_overwrites(tools: WorkspaceToolset, ws: Path) -> None:
    assert (
        tools.write_file("new/deep/file.txt", "content\n") == "created new/deep/file.txt (8 bytes)"
    )
    assert (ws / "new" / "deep" / "file.txt").read_text() == "content\n"
    assert tools.write_file("hello.txt", "bye\n").startswith("overwrote hello.txt")
    assert (ws / "hello.txt").read_text() == "bye\n"


def test_write_through_inside_symlink_writes_the_target(tools: WorkspaceToolset, ws: Path) -> None:
    (ws / "link.txt").symlink_to("hello.txt")
    assert tools.write_file("link.txt", "via link\n") == "overwrote hello.txt (9 bytes)"
    assert (ws / "hello.txt").read_text() == "via link\n"
    assert (ws / "link.txt").is_symlink()


def test_edit_file_exact_match(tools: WorkspaceToolset, ws: Path) -> None:
    assert tools.edit_file("src/app.py", "return 42", "return 43") == (
        "edited src/app.py: replaced 1 occurrence"
    )
    assert "return 43" in (ws / "src" / "app.py").read_text()


def test_edit_file_ambiguous_and_missing(tools: WorkspaceToolset, ws: Path) -> None:
    (ws / "dup.txt").write_text("x = 1\nx = 1\n")
    before = snapshot(ws)
    with pytest.raises(ToolFailed, match="occurs 2 times"):
        tools.edit_file("dup.txt", "x = 1", "x = 2")
    with pytest.raises(ToolFailed, match="not found"):
        tools.edit_file("dup.txt", "y = 1", "y = 2")
    with pytest.raises(ToolFailed, match="empty"):
        tools.edit_file("dup.txt", "", "y")
    assert snapshot(ws) == before
    assert tools.edit_file("dup.txt", "x = 1", "x = 2", replace_all=True).endswith("2 occurrences")
    assert (ws / "dup.txt").read_text() == "x = 2\nx = 2\n"


# -- list / glob / grep --------------------------------------------------------------------


def test_list_dir(tools: WorkspaceToolset, ws: Path) -> None:
    (ws / ".pydantic-deep").mkdir()
    (ws / "ln").symlink_to("src")
    out = tools.list_dir()
    assert out.splitlines() == ["hello.txt  (12 bytes)", "ln -> src", "src/"]
    assert tools.list_dir("src").splitlines() == ["app.py  (26 bytes)", "util.py  (21 bytes)"]
    with pytest.raises(ToolFailed, match="not a directory"):
        tools.list_dir("hello.txt")
    with pytest.raises(ToolFailed, match="does not exist"):
        tools.list_dir("nope")


def test_glob(tools: WorkspaceToolset, ws: Path) -> None:
    (ws / "src" / "pkg").mkdir()
    (ws / "src" / "pkg" / "mod.py").write_text("")
    (ws / ".pydantic-deep").mkdir()
    (ws / ".pydantic-deep" / "hidden.py").write_text("")
    assert tools.glob("*.txt") == "hello.txt"
    assert tools.glob("**/*.py").splitlines() == ["src/app.py", "src/pkg/mod.py", "src/util.py"]
    assert tools.glob("src/**/*.py").splitlines() == ["src/app.py", "src/pkg/mod.py", "src/util.py"]
    assert tools.glob("src/*").splitlines() == ["src/app.py", "src/pkg/", "src/util.py"]
    assert tools.glob("./src/p?g/*.py") == "src/pkg/mod.py"
    assert "no paths match" in tools.glob("*.rs")
    with pytest.raises(ToolFailed):
        tools.glob("../*")
    with pytest.raises(ToolFailed):
        tools.glob("/etc/*")


def test_glob_does_not_descend_symlinked_dirs(
    tools: WorkspaceToolset, ws: Path, outside: Path
) -> None:
    (ws / "out").symlink_to(outside)
    assert "secret" not in tools.glob("**/*")


def test_glob_to_regex() -> None:
    assert glob_to_regex("a/**/b").match("a/b")
    assert glob_to_regex("a/**/b").match("a/x/y/b")
    assert not glob_to_regex("*.py").match("src/a.py")
    assert glob_to_regex("[!a]x").match("bx") and not glob_to_regex("[!a]x").match("ax")


def test_grep(tools: WorkspaceToolset, ws: Path) -> None:
    out = tools.grep(r"return \d+")
    assert out == "src/app.py:2:     return 42"
    assert tools.grep("VALUE|hello").splitlines() == [
        "hello.txt:1: hello world",
        "src/util.py:3: VALUE = 1",
    ]
    assert tools.grep("import", path_glob="*.py") == "src/util.py:1: import os"
    assert tools.grep("hello", path_glob="src/**/*.py") == "no matches for 'hello'"
    with pytest.raises(ToolFailed, match="invalid regular expression"):
        tools.grep("(unclosed")


def test_grep_skips_binaries_hidden_and_symlinks(
    tools: WorkspaceToolset, ws: Path, outside: Path
) -> None:
    (ws / "data.bin").write_bytes(b"needle\x00\x01needle")
    (ws / ".pydantic-deep").mkdir()
    (ws / ".pydantic-deep" / "state.txt").write_text("needle\n")
    (ws / "out").symlink_to(outside)
    (outside / "more.txt").write_text("needle\n")
    (ws / "notes.txt").write_text("a needle here\n")
    assert tools.grep("needle") == "notes.txt:1: a needle here"


def test_grep_output_is_bounded(tools: WorkspaceToolset, ws: Path) -> None:
    (ws / "many.txt").write_text("hit " + "x" * 1000 + "\n" + "hit\n" * 500)
    out = tools.grep("hit").splitlines()
    assert len(out) == 201
    assert out[0].endswith("...") and len(out[0]) < 400
    assert out[-1].startswith("... 301 more matches")


# -- delete --------------------------------------------------------------------------------


def test_delete_file(tools: WorkspaceToolset, ws: Path, outside: Path) -> None:
    assert tools.delete_file("hello.txt") == "deleted hello.txt"
    assert not (ws / "hello.txt").exists()
    with pytest.raises(ToolFailed, match="does not exist"):
        tools.delete_file("hello.txt")
    with pytest.raises(ToolFailed, match="directory"):
        tools.delete_file("src")
    (ws / "out").symlink_to(outside)
    assert tools.delete_file("out") == "deleted out"  # the link goes, never its target
    assert (outside / "secret.txt").exists()


# -- escapes: refused, readable by the model, nothing changed --------------------------------


def _escape_cases(ws: Path, outside: Path) -> list[tuple[str, dict[str, Any]]]:
    (ws / "out").symlink_to(outside)
    (ws / "c1").symlink_to("c2")
    (ws / "c2").symlink_to("src/c3")
    (ws / "src" / "c3").symlink_to("../../outside/secret.txt")
    cases: list[tuple[str, dict[str, Any]]] = []
    for path in ("../x", "/etc/passwd", "out/secret.txt", "c1", "src/../../outside/secret.txt"):
        cases += [
            ("read_file", {"path": path}),
            ("write_file", {"path": path, "content": "pwned"}),
            ("edit_file", {"path": path, "old": "top", "new": "pwned"}),
            ("list_dir", {"path": path}),
        ]
        if path != "c1":  # deleting the link c1 itself is allowed: see test_delete_file
            cases.append(("delete_file", {"path": path}))
    cases += [("write_file", {"path": "out/new.txt", "content": "pwned"})]
    cases += [("write_file", {"path": ".pydantic-deep/x", "content": "pwned"})]
    return cases


def test_escapes_are_refused_and_nothing_changes(
    tools: WorkspaceToolset, ws: Path, outside: Path
) -> None:
    cases = _escape_cases(ws, outside)
    before_ws, before_out = snapshot(ws), snapshot(outside)
    for tool, args in cases:
        with pytest.raises(ToolFailed, match="refused"):
            getattr(tools, tool)(**args)
    assert snapshot(ws) == before_ws
    assert snapshot(outside) == before_out
    assert (outside / "secret.txt").read_text() == "top secret\n"


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "out/secret.txt", "c1"])
async def test_refusal_reaches_the_model_as_a_failed_tool_result(
    tools: WorkspaceToolset, ws: Path, outside: Path, path: str
) -> None:
    _escape_cases(ws, outside)
    before = snapshot(outside)
    ret = await call_through_agent(tools, "write_file", path=path, content="pwned")
    assert ret.outcome == "failed"
    assert "refused" in ret.model_response_str()
    assert snapshot(outside) == before


async def test_tools_work_through_an_agent(tools: WorkspaceToolset, ws: Path) -> None:
    ret = await call_through_agent(tools, "write_file", path="a/b.txt", content="hi\n")
    assert ret.outcome == "success" and ret.content == "created a/b.txt (3 bytes)"
    ret = await call_through_agent(tools, "edit_file", path="a/b.txt", old="hi", new="ho")
    assert (ws / "a" / "b.txt").read_text() == "ho\n"
    ret = await call_through_agent(tools, "grep", pattern="ho")
    assert ret.content == "a/b.txt:1: ho"


def test_works_on_a_proc_root_view(ws: Path) -> None:
    import os

    view = Path(f"/proc/{os.getpid()}/root{ws}")
    tools = create_workspace_toolset(view, command_runner=LocalCommandRunner())
    assert tools.root == view
    tools.write_file("x/y.txt", "via view\n")
    assert (ws / "x" / "y.txt").read_text() == "via view\n"
    assert tools.glob("x/*") == "x/y.txt"
    assert tools.grep("via") == "x/y.txt:1: via view"
    with pytest.raises(ToolFailed, match="refused"):
        tools.read_file("../outside/secret.txt")
