"""The CLI's view of command candidates (they live in ``branching_core.patterns.commands``,
public, shared with the MCP server) and its warning printer."""

from __future__ import annotations

import sys

from branching_core.patterns.commands import (
    CommandCandidate,
    CommandOutput,
    CommandTask,
    parse_score,
)


def warn_stderr(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


__all__ = ["CommandCandidate", "CommandOutput", "CommandTask", "parse_score", "warn_stderr"]
