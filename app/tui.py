"""``forkdeck [PATH] [--model MODEL] [--backend B]``: open the chat screen on a workspace.

Only argparse, Textual and the app's own light modules are imported before the first
frame; pydantic-ai and the fork engine load in a worker once the screen is up.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

BACKEND_CHOICES = ("auto", "overlay", "reflink", "copy")


class _ForkdeckParser(argparse.ArgumentParser):
    """``forkdeck --help``: the TUI's options, then every subcommand on one line each
    (built only when help is printed, so a launch does not import the CLI for it)."""

    def format_help(self) -> str:
        from .subcommands import listing

        return f"{super().format_help().rstrip()}\n\n{listing()}\n"


class _Version(argparse.Action):
    """``-V``/``--version``; the version is looked up only when asked (not before the
    first frame: ``importlib.metadata`` is slow to import)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS,
                 **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from branching_core.cli import version

        print(f"forkdeck {version()}")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = _ForkdeckParser(
        prog="forkdeck",
        usage="forkdeck [PATH] [options]  |  forkdeck COMMAND ...",
        description=(
            "Chat with an agent on a workspace and fork the live run into parallel "
            "copy-on-write branches; merge the winner."
        ),
    )
    parser.add_argument("-V", "--version", action=_Version)
    parser.add_argument("path", nargs="?", default=".", help="workspace (default: .)")
    parser.add_argument(
        "--model",
        help="provider:model (e.g. anthropic:claude-haiku-5-5), openai-compatible:NAME@URL, "
        "a server URL (http://host:port/v1), or 'offline' (no LLM)",
    )
    parser.add_argument(
        "--base-url",
        metavar="URL",
        help="OpenAI-compatible server for every model name (over [model] base_url)",
    )
    parser.add_argument(
        "--price",
        metavar="IN/OUT",
        help="USD per million input/output tokens, for budgets on an unlisted model",
    )
    parser.add_argument(
        "--backend",
        choices=BACKEND_CHOICES,
        help="workspace branching backend (default: [workspace] backend, else auto)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the last chat on this workspace (saved under .pydantic-deep/sessions/)",
    )
    parser.add_argument(
        "--subagents",
        metavar="MODULE:NAME",
        help="sub-agents the chat agent may delegate to: a SubAgentBranches or a list of "
        "SubAgent definitions, importable as MODULE:NAME",
    )
    return parser


def load_subagents(spec: str) -> Any:
    """Import ``MODULE:NAME`` and return a ``SubAgentBranches`` (a list of ``SubAgent``
    definitions is wrapped in one); raises ``ValueError`` with a one-line reason."""
    import importlib

    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValueError(f"--subagents wants MODULE:NAME, not {spec!r}")
    try:
        value = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"--subagents {spec}: {exc}") from exc
    from branching_core.live import SubAgent, SubAgentBranches

    if isinstance(value, SubAgentBranches):
        return value
    if isinstance(value, SubAgent):
        value = [value]
    if isinstance(value, list | tuple) and all(isinstance(d, SubAgent) for d in value):
        return SubAgentBranches(definitions=list(value))
    raise ValueError(
        f"--subagents {spec}: expected SubAgentBranches or SubAgent definitions, "
        f"got {type(value).__name__}"
    )


def main(argv: list[str] | None = None) -> int:
    if argv and argv[0] == "demo":  # `forkdeck demo [PATH]` (a workspace named demo: ./demo)
        from .demo import main as demo_main

        return demo_main(argv[1:])
    args = build_parser().parse_args(argv)
    root = Path(args.path).expanduser()
    if not root.exists():
        print(f"forkdeck: workspace {root} does not exist (forkdeck --help lists the "
              "commands)", file=sys.stderr)
        return 2
    if not root.is_dir():
        print(f"forkdeck: workspace {root} is not a directory", file=sys.stderr)
        return 2

    if args.price:
        from branching_core.agent import Price

        try:
            Price.parse(args.price)
        except ValueError as exc:
            print(f"forkdeck: --price: {exc}", file=sys.stderr)
            return 2

    from .forkdeck_app import ForkdeckApp
    from .session import ChatSession

    subagents = None
    if args.subagents:
        try:
            subagents = load_subagents(args.subagents)
        except ValueError as exc:
            print(f"forkdeck: {exc}", file=sys.stderr)
            return 2
    session = ChatSession(
        root.resolve(), requested_model=args.model, backend=args.backend, subagents=subagents,
        base_url=args.base_url, price=args.price,
    )
    ForkdeckApp(session, resume=args.resume).run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
