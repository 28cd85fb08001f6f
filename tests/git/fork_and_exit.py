"""Run as a script: fork the workspace at argv[1] into branches "fast" and "slow", wait for
them, and exit without resolving (the fork stays open on disk, as after a closed TUI)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from branching_core.agent import SandboxCommandRunner
from branching_core.workspace import Workspace
from tests.review.forks import call, fork_with

BINARY = bytes(range(256)) * 8


async def main(root: Path) -> None:
    ws = Workspace(root)
    coord = await fork_with(
        ws,
        {
            "fast": [
                call("write_file", path="src/app.py", content="VALUE = 2\n"),
                call(
                    "run_command",
                    command="rm README.txt && ln -s src/app.py link && chmod +x src/tool.sh",
                ),
            ],
            "slow": [call("write_file", path="src/app.py", content="VALUE = 3\n")],
        },
        runner=SandboxCommandRunner(),
    )
    fast = next(rt for rt in coord.branches.values() if rt.label == "fast")
    (Path(fast.ws_branch.path) / "logo.bin").write_bytes(BINARY)
    print(coord.fork_id, flush=True)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
