"""What an agent's sandbox shows of the user's home: only what its profile names.

The home (here a fake one in /var/tmp, holding an SSH key and an agent's config) is
masked; ``expose`` brings back exactly the named paths, read-only unless declared
read-write.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from branching_core.external import AgentRace, Exposed, resolve_profile
from branching_core.workspace import Workspace
from tests.external.conftest import agent_cmd


def _probe(project: Path, home: Path, monkeypatch, expose: tuple[Exposed, ...]) -> dict:
    key, config = home / ".ssh" / "id_ed25519", home / ".fakeagent" / "config"
    monkeypatch.setenv("PROBE_PATHS", f"{key}:{config}")
    profile = replace(resolve_profile(agent_cmd("secrets")), env=("PROBE_PATHS",),
                      expose=expose)
    race = AgentRace(Workspace(project), [profile], "probe", pick="first")
    race.run()
    lines = [line for line in race.runs["cmd"].lines if line.startswith("REPORT ")]
    assert lines, list(race.runs["cmd"].lines)
    report = json.loads(lines[0][len("REPORT "):])
    return {Path(p).name: entry for p, entry in report.items()}


def test_nothing_exposed_reads_neither_the_key_nor_the_agent_config(
        project: Path, fake_home: Path, monkeypatch) -> None:
    report = _probe(project, fake_home, monkeypatch, ())
    assert "read" not in report["id_ed25519"] and "read" not in report["config"]
    assert "wrote" not in report["id_ed25519"] and "wrote" not in report["config"]
    assert (fake_home / ".ssh" / "id_ed25519").read_text() == "PRIVATE KEY\n"
    assert (fake_home / ".fakeagent" / "config").read_text() == "token = abc\n"


def test_config_exposed_read_only_is_readable_not_writable(
        project: Path, fake_home: Path, monkeypatch) -> None:
    report = _probe(project, fake_home, monkeypatch, (Exposed("~/.fakeagent"),))
    assert report["config"]["read"] == "token = abc\n"
    assert "wrote" not in report["config"]
    assert "read-only" in report["config"]["write_error"].lower()
    assert "read" not in report["id_ed25519"]  # the key stays hidden: it was not named
    assert (fake_home / ".fakeagent" / "config").read_text() == "token = abc\n"


def test_config_exposed_read_write_keeps_what_the_agent_writes(
        project: Path, fake_home: Path, monkeypatch) -> None:
    report = _probe(project, fake_home, monkeypatch,
                    (Exposed("~/.fakeagent", writable=True),))
    assert report["config"]["wrote"] is True
    assert "read" not in report["id_ed25519"]
    assert (fake_home / ".fakeagent" / "config").read_text().endswith("written by the agent\n")


def test_builtin_profiles_name_only_their_own_directories() -> None:
    from branching_core.external import BUILTIN
    from branching_core.sandbox.masks import HOME_SECRET_DIRS, HOME_SECRET_FILES

    secret = {f"~/{p}" for p in (*HOME_SECRET_DIRS, *HOME_SECRET_FILES)}
    for name, profile in BUILTIN.items():
        paths = {e.path for e in profile.expose}
        assert paths, name
        assert not paths & secret, name
        assert all(p.startswith(f"~/.{name}") or (name == "claude" and p == "~/.claude.json")
                   for p in paths), (name, paths)
