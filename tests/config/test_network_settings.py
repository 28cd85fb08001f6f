"""``[sandbox] network`` and ``[services.<name>]`` in config.toml, and the setup the front
doors derive from them (defaults per purpose, fallback only for a default)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from branching_core.config import load_settings
from branching_core.sandbox.net_settings import network_setup
from branching_core.sandbox.network import NetworkPolicy, policy, set_policy


@pytest.fixture(autouse=True)
def _restore_policy() -> Iterator[None]:
    before = policy()
    yield
    set_policy(before)


def write(root: Path, text: str) -> Path:
    (root / ".pydantic-deep").mkdir(exist_ok=True)
    path = root / ".pydantic-deep" / "config.toml"
    path.write_text(text)
    return path


def test_services_and_network_are_read_and_bad_ones_reported(tmp_path: Path) -> None:
    path = write(tmp_path, """
[sandbox]
network = "private"
network_stack = "slirp4netns"

[services.web]
command = "exec python3 -m http.server 8000"
port = 8000
ready = "http:/health"
env = { MODE = "dev" }
autostart = true

[services.db]
command = "exec postgres -D ./pgdata -k ."
port = 5432
stop_signal = "INT"

[services.noport]
command = "sleep 1"
ready = "http"

[services.typo]
command = "x"
prot = 1
""")
    before = path.read_bytes()
    load = load_settings(tmp_path)
    s = load.settings
    assert (s.sandbox_network, s.network_stack, s.network_fallback) == ("private", "slirp4netns",
                                                                        None)
    assert sorted(s.services) == ["db", "web"]
    web = s.services["web"]
    assert (web.port, web.ready, web.env, web.autostart) == (8000, "http:/health",
                                                             {"MODE": "dev"}, True)
    assert (s.services["db"].ready, s.services["db"].stop_signal) == ("tcp", "INT")
    messages = [p.message for p in load.problems]
    assert any("services.noport: a http readiness probe needs a port" in m for m in messages)
    assert any("services.typo: unknown key 'prot'" in m for m in messages)
    assert path.read_bytes() == before  # reading never writes


def test_bad_network_mode_falls_back_to_the_default_with_a_problem(tmp_path: Path) -> None:
    write(tmp_path, '[sandbox]\nnetwork = "wifi"\n')
    load = load_settings(tmp_path)
    assert load.settings.sandbox_network is None
    assert "sandbox.network: must be one of none, private, host" in load.problems[0].message


def test_setup_defaults_per_purpose_and_fallback_only_for_a_default(tmp_path: Path) -> None:
    plain = load_settings(tmp_path).settings
    agent = network_setup(plain, purpose="agent")
    assert (agent.mode, agent.chosen, agent.policy.fallback) == ("private", False, "none")
    assert policy() == agent.policy != NetworkPolicy()  # what network="private" sandboxes now use
    assert network_setup(plain).mode == "none"
    chosen = network_setup(plain, override="private")
    assert (chosen.mode, chosen.chosen, chosen.policy.fallback) == ("private", True, None)
    write(tmp_path, '[services.web]\ncommand = "x"\nport = 1\n')
    with_services = network_setup(load_settings(tmp_path).settings)
    assert with_services.mode == "private" and [s.name for s in with_services.services] == ["web"]
    with pytest.raises(ValueError, match="unknown network mode 'wifi'"):
        network_setup(plain, override="wifi")
