"""``forkdeck [PATH] [--model MODEL] [--backend B]``: open the chat screen on a workspace.

Only argparse, Textual and the app's own light modules are imported before the first
frame; pydantic-ai and the fork engine load in a worker once the screen is up.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

BACKEND_CHOICES = ("auto", "overlay", "reflink", "copy")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="forkdeck",
        description=(
            "Chat with an agent on a workspace and fork the live run into parallel "
            "copy-on-write branches; merge the winner."
        ),
        epilog="Headless commands: forkdeck run|speculate|best-of-n|... --help",
    )
    parser.add_argument("path", nargs="?", default=".", help="workspace (default: .)")
    parser.add_argument(
        "--model",
        help="provider:model (e.g. anthropic:claude-haiku-5-5), or 'offline' (no LLM)",
    )
    parser.add_argument(
        "--backend",
        choices=BACKEND_CHOICES,
        help="workspace branching backend (default: [workspace] backend, else auto)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    root = Path(args.path).expanduser()
    if not root.exists():
        print(f"forkdeck: workspace {root} does not exist", file=sys.stderr)
        return 2
    if not root.is_dir():
        print(f"forkdeck: workspace {root} is not a directory", file=sys.stderr)
        return 2

    from app.forkdeck_app import ForkdeckApp
    from app.session import ChatSession

    session = ChatSession(root.resolve(), requested_model=args.model, backend=args.backend)
    ForkdeckApp(session).run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
