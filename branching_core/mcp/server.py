"""``forkdeck mcp``: the tools on the official MCP SDK, over stdio or streamable HTTP.

One server serves one workspace. Each tool call runs in a worker thread (engine calls
block), is attributed to the client session that made it (stdio: the one connection;
HTTP: its ``Mcp-Session-Id``), and can fail only with a ``ToolError`` of one line: an
unexpected exception is caught here too, so no tool call can take the server down.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.types import CallToolResult, TextContent
from pydantic import Field

from branching_core import BranchingError
from branching_core.errors import error_name
from branching_core.mcp.bounds import one_line
from branching_core.mcp.results import (
    AbortResult,
    BranchCreated,
    BranchListing,
    CommitResult,
    DiffResult,
    ExploreResult,
    RunLimits,
    RunResult,
)
from branching_core.mcp.tools import ForkdeckTools

log = logging.getLogger(__name__)
STDIO_OWNER = "stdio"
SESSION_HEADER = "mcp-session-id"

MCP_INSTRUCTIONS = """\
forkdeck gives you copy-on-write branches of one workspace directory.
1. branch_create -> {label, path}. Work at `path` with your own file tools: changes there
   are private to the branch (the workspace and other branches do not see them).
2. branch_run(label, command) runs a shell command in the branch's sandbox; the branch
   appears at the workspace's own path, so run tests there the usual way.
3. branch_diff(label) shows what changed. branch_commit(label) lands it in the workspace
   (first commit wins: a sibling made before it can no longer commit; start a new branch).
4. branch_abort(label) throws a branch away. Branches you leave open are aborted when you
   disconnect, unless created with keep=true.
explore(commands, mode) races several shell commands, each in its own branch, and commits
the winner (first_success: first to exit 0; best_score: best score written to fd 3).
"""


def _owner(ctx: Context | None) -> str:
    headers = None
    if ctx is not None:
        try:
            headers = ctx.headers
        except (ValueError, AttributeError):
            headers = None
    if headers:
        session = headers.get(SESSION_HEADER)
        if session:
            return f"http:{session}"
    return STDIO_OWNER


def _guard(call: Any) -> Any:
    """Run one tool body: its own errors pass as they are; every other failure becomes a
    one-line ``ToolError`` so the client sees why and the server keeps serving."""
    try:
        return call()
    except ToolError:
        raise
    except BranchingError as exc:
        raise ToolError(f"{error_name(exc)}: {one_line(exc)}") from None
    except (OSError, ValueError, TypeError, RuntimeError, KeyError, TimeoutError) as exc:
        raise ToolError(f"{error_name(exc)}: {one_line(exc)}") from None
    except Exception as exc:  # the server never dies from a tool call
        log.exception("tool failed unexpectedly")
        raise ToolError(f"internal error ({error_name(exc)}): {one_line(exc)}") from None


async def _one_line_errors(ctx: Any, call_next: Any) -> Any:
    """Server middleware: a failed tool call's text is one line, also for the failures the
    SDK reports itself (arguments that fail the schema come back as a multi-line pydantic
    report otherwise)."""
    result = await call_next(ctx)
    if getattr(ctx, "method", None) != "tools/call":
        return result
    if isinstance(result, CallToolResult) and result.is_error:
        for part in result.content:
            if isinstance(part, TextContent):
                part.text = _short(part.text)
    elif isinstance(result, dict) and result.get("isError", result.get("is_error")):
        for part in result.get("content") or ():
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                part["text"] = _short(part["text"])
    return result


def _short(text: str) -> str:
    """Pydantic's report keeps its useful part before "For further information"."""
    lines = [ln for ln in text.splitlines() if not ln.strip().startswith("For further")]
    return one_line(" ".join(lines))


def build_server(tools: ForkdeckTools) -> MCPServer:
    """The MCP server for ``tools``' workspace (tools named as issue 26 specifies)."""
    server = MCPServer(
        "forkdeck",
        title="forkdeck branches",
        instructions=MCP_INSTRUCTIONS,
        # stderr is the client's log: anticipated tool errors are not news there
        log_level="WARNING",
        middleware=[_one_line_errors],
    )

    @server.tool()
    def branch_create(
        ctx: Context,
        name: Annotated[str | None, Field(
            description="Label for the branch (letters, digits, '.', '_', '-'); "
            "default b1, b2, ...")] = None,
        parent: Annotated[str | None, Field(
            description="Label of an open branch to branch from (nesting); default: "
            "the workspace")] = None,
        keep: Annotated[bool, Field(
            description="Keep the branch when this session ends (a later session can "
            "commit or abort it)")] = False,
    ) -> BranchCreated:
        """Create a copy-on-write branch of the workspace (or of another open branch).

        Returns its label and `path`, a real directory: read and edit files there with
        your own tools. Changes are private to the branch until branch_commit."""
        return _guard(lambda: tools.create(name, parent, keep, _owner(ctx)))

    @server.tool()
    def branch_list() -> BranchListing:
        """List the open branches: label, parent, path, number of changed paths, created."""
        return _guard(tools.list)

    @server.tool()
    def branch_run(
        label: Annotated[str, Field(description="The branch to run in")],
        command: Annotated[str, Field(description="A shell command line (run by /bin/sh -c)")],
        timeout_s: Annotated[float | None, Field(
            description="Kill the command after this many seconds (default: the "
            "server's run timeout)")] = None,
        limits: Annotated[RunLimits | None, Field(
            description="Resource caps for this run (else the server's)")] = None,
    ) -> RunResult:
        """Run a shell command in the branch's sandbox and return exit code, output
        (bounded) and duration.

        The branch appears at the workspace's own path (the command's working
        directory), so paths in the project resolve as usual; only the branch is
        writable (plus a private /tmp), and the network is off unless the server allows it."""
        return _guard(lambda: tools.run(label, command, timeout_s, limits))

    @server.tool()
    def branch_diff(
        label: Annotated[str, Field(description="The branch to compare with its parent")],
        paths: Annotated[list[str] | None, Field(
            description="Only these files or directories (relative, or absolute under "
            "the branch path)")] = None,
    ) -> DiffResult:
        """Show what the branch changed relative to its parent: paths (created, modified,
        deleted, renamed) and a unified diff, bounded in size."""
        return _guard(lambda: tools.diff(label, paths))

    @server.tool()
    def branch_commit(
        label: Annotated[str, Field(description="The branch to land")],
    ) -> CommitResult:
        """Land the branch's changes in its parent (the workspace, or the parent branch),
        all or nothing. The first sibling to commit wins; a branch whose sibling already
        committed (or whose paths changed in the parent meanwhile) gets a conflict error
        and is aborted, never silently overwriting."""
        return _guard(lambda: tools.commit(label))

    @server.tool()
    def branch_abort(
        label: Annotated[str, Field(description="The branch to throw away")],
    ) -> AbortResult:
        """Throw a branch away (with its child branches); nothing lands."""
        return _guard(lambda: tools.abort(label))

    @server.tool()
    def explore(
        commands: Annotated[list[str], Field(
            description="Shell commands, one candidate each; each runs in its own branch")],
        mode: Annotated[Literal["first_success", "best_score"], Field(
            description="first_success: the first candidate to succeed wins and the rest "
            "are killed; best_score: all run, the best score (a number written to fd 3, "
            "e.g. `echo 0.8 >&3`; else 1 for success) wins")],
        test: Annotated[str | None, Field(
            description="A shell command run after each candidate in its branch; the "
            "candidate succeeds only if it exits 0")] = None,
        commit: Annotated[bool, Field(
            description="Land the winner in the workspace (false: only report)")] = True,
        timeout_s: Annotated[float | None, Field(
            description="Each candidate's time limit in seconds")] = None,
    ) -> ExploreResult:
        """Try several shell commands in parallel copy-on-write branches and keep the
        winner: per candidate status, exit code and score, and which one won."""
        return _guard(lambda: tools.explore(commands, mode, test, commit, timeout_s))

    @server.resource("forkdeck://branches/{label}/diff", mime_type="text/x-diff")
    def branch_diff_resource(label: str) -> str:
        """The unified diff of an open branch against its parent (bounded)."""
        try:
            result = tools.diff(label, None)
        except ToolError as exc:
            raise ResourceError(str(exc)) from None
        except BranchingError as exc:
            raise ResourceError(one_line(exc)) from None
        return result.diff + (f"\n# {result.note}\n" if result.note else "")

    return server


__all__ = ["MCP_INSTRUCTIONS", "build_server"]
