"""``mcp [PATH] [--http [HOST:]PORT]``: serve PATH's branches to any MCP client.

stdio by default (what Claude Code, Codex, Cursor and Gemini CLI launch); streamable
HTTP with ``--http``, on 127.0.0.1 unless a host is given. The limits flags and
``--network`` are the settings every ``branch_run`` and ``explore`` obeys.
"""

from __future__ import annotations

import argparse
import sys

from branching_core.cli import _types
from branching_core.cli._common import UsageError, limits_from, open_workspace


def http_address(text: str) -> tuple[str, int]:
    """``PORT`` or ``HOST:PORT`` (``[::1]:PORT`` for IPv6); the host defaults to 127.0.0.1."""
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = "127.0.0.1", text
    host = host.strip("[]") or "127.0.0.1"
    try:
        port = int(port_text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected [HOST:]PORT") from None
    if not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"port must be 1-65535, got {port}")
    return host, port


def cmd_mcp(args: argparse.Namespace) -> int:
    from branching_core.mcp.tools import ForkdeckTools, ServerOptions
    from branching_core.mcp.transport import serve_http, serve_stdio

    if args.cmd:
        raise UsageError("mcp takes no -- CMD")
    if args.path is not None:
        args.workspace = args.path
    limits = limits_from(args)
    ws = open_workspace(args)
    options = ServerOptions(limits=limits, network=args.network,
                            run_timeout_s=args.run_timeout, max_branches=args.max_branches)
    tools = ForkdeckTools(ws, options)
    adopted = tools.book.adopt_kept("kept")
    if adopted:
        print(f"forkdeck mcp: kept branches from earlier sessions: {', '.join(adopted)}",
              file=sys.stderr, flush=True)
    if args.http is None:
        serve_stdio(tools)
    else:
        host, port = args.http
        serve_http(tools, host, port, args.idle_timeout)
    return 0


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser("mcp", parents=[common], help="serve branches to MCP clients",
                       description="Serve PATH (default: the current directory) as an MCP "
                                   "server: branch_create, branch_run, branch_diff, "
                                   "branch_commit, branch_abort, branch_list, explore.")
    p.add_argument("path", nargs="?", metavar="PATH", help="the workspace directory")
    p.add_argument("--http", metavar="[HOST:]PORT", type=http_address,
                   help="streamable HTTP at http://HOST:PORT/mcp instead of stdio "
                        "(host 127.0.0.1 unless given)")
    p.add_argument("--network", choices=["none", "private", "host"], default="none",
                   help="network for sandboxed commands: none (default), private (own "
                        "localhost, outbound through pasta/slirp4netns) or host")
    p.add_argument("--run-timeout", type=_types.seconds, default=600.0, metavar="S",
                   help="default time limit of branch_run and explore candidates (600)")
    p.add_argument("--max-branches", type=_types.count, default=64, metavar="N",
                   help="open branches allowed at once (default 64)")
    p.add_argument("--idle-timeout", type=_types.seconds, default=1800.0, metavar="S",
                   help="HTTP: a session silent this long ends and its branches are "
                        "aborted (default 1800)")
    p.set_defaults(handler=cmd_mcp)


__all__ = ["cmd_mcp", "http_address"]
