"""docs/mcp.md's set-up snippets are copied as they are: the JSON and TOML blocks parse
and name ``forkdeck mcp``, and every ``forkdeck mcp ...`` line parses with the real CLI."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path

from branching_core.cli import build_parser

DOC = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def _blocks(language: str) -> list[str]:
    return [m.group(2) for m in FENCE.finditer(DOC.read_text()) if m.group(1) == language]


def test_json_and_toml_snippets_parse_and_launch_forkdeck_mcp() -> None:
    configs = [json.loads(b) for b in _blocks("json")]
    configs += [tomllib.loads(b) for b in _blocks("toml")]
    assert len(configs) >= 3  # Cursor, Gemini CLI, Codex
    for config in configs:
        servers = config.get("mcpServers") or config.get("mcp_servers")
        assert servers and "forkdeck" in servers, config
        entry = servers["forkdeck"]
        assert entry["command"] == "forkdeck" and entry["args"][0] == "mcp", entry


def test_every_forkdeck_mcp_command_line_parses() -> None:
    lines = [ln for b in _blocks("bash") for ln in b.splitlines()]
    commands = [ln[ln.index("forkdeck mcp"):].split("#")[0] for ln in lines
                if "forkdeck mcp" in ln and "mcp add" not in ln and "$(" not in ln]
    commands += [ln[ln.index("-- forkdeck mcp") + 3:] for ln in lines if "-- forkdeck mcp" in ln]
    assert len(commands) >= 4
    parser = build_parser()
    for command in commands:
        args = parser.parse_args(shlex.split(command)[1:])
        assert args.command == "mcp", command
