"""Issue 14 items 1-4: every documented way of connecting a model reaches the server it names.

Each test drives a real ``ChatSession`` (the TUI's controller) or the resolver against the
scripted server on 127.0.0.1, and checks what the *server* received (model name, route).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from branching_core.agent import display_name, is_offline
from branching_core.agent.models import connect_model, connect_or_offline, resolve_model
from branching_core.config import load_settings
from branching_core.errors import ConfigError
from branching_core.fork import BranchSpec
from tests.realserver.helpers import prepared, turn, write_config
from tests.support.openai_server import Reply, ScriptedServer


@pytest.fixture
def root(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("hello\n")
    return ws


# -- item 1: a hosted model without its key falls back to offline, with the reason -------------
@pytest.mark.parametrize(
    ("model", "key"),
    [("openai:gpt-6-luna", "OPENAI_API_KEY"), ("anthropic:claude-haiku-5-5", "ANTHROPIC_API_KEY")],
)
async def test_missing_key_falls_back_to_offline_with_reason(
    root: Path, model: str, key: str
) -> None:
    session = await prepared(root, requested_model=model, env={})
    assert session.ready and is_offline(session.model)
    errors = [n.message for n in session.notices if n.severity == "error"]
    assert errors and key in errors[0] and "offline" in errors[0]
    output, _ = await turn(session, "ls")  # the session works: no "still starting up"
    assert output


async def test_missing_key_from_config_default_falls_back(root: Path) -> None:
    write_config(root, '[model]\ndefault = "openai:gpt-6-luna"\n')
    session = await prepared(root, env={})
    assert session.ready and is_offline(session.model)
    assert any("OPENAI_API_KEY" in n.message for n in session.notices)


# -- item 2: openai_base_url, base_url, bare names ---------------------------------------------
async def test_openai_prefix_goes_to_openai_base_url(root: Path, server: ScriptedServer) -> None:
    write_config(root, f'[model]\nopenai_base_url = "{server.url}"\n')
    session = await prepared(root, requested_model="openai:scripted-model", env={})
    assert not is_offline(session.model), session.notices
    output, sink = await turn(session, "hi")
    assert output == "Hello from the server."
    assert "".join(sink.text) == "Hello from the server."
    assert server.chat_requests[-1]["model"] == "scripted-model"


async def test_bare_default_with_base_url(root: Path, server: ScriptedServer) -> None:
    write_config(root, f'[model]\ndefault = "mymodel"\nbase_url = "{server.url}"\n')
    assert load_settings(root).problems == []
    session = await prepared(root, env={})
    await turn(session, "hi")
    assert server.chat_requests[-1]["model"] == "mymodel"
    assert display_name(session.model) == f"mymodel @ {server.url}"


def test_bare_default_without_server_names_the_real_key(root: Path) -> None:
    write_config(root, '[model]\ndefault = "mymodel"\n')
    problems = load_settings(root).problems
    assert problems and problems[0].key == "model.default"
    with pytest.raises(ConfigError, match=r"base_url") as info:
        resolve_model("mymodel", env={})
    assert "settings 'model'" not in str(info.value)


async def test_ollama_base_url_is_honoured(root: Path, server: ScriptedServer) -> None:
    write_config(root, f'[model]\nollama_base_url = "{server.url}"\n')
    session = await prepared(root, requested_model="ollama:scripted-model", env={})
    await turn(session, "hi")
    assert server.chat_requests[-1]["model"] == "scripted-model"


async def test_ollama_base_url_without_v1_gets_it(server: ScriptedServer) -> None:
    bare = server.url.removesuffix("/v1")
    model = resolve_model("ollama:llama3.2", settings={"ollama_base_url": bare}, env={})
    assert str(model.base_url).rstrip("/") == server.url  # type: ignore[union-attr]


# -- item 3: a URL as --model sends a clean name -----------------------------------------------
async def test_url_model_strips_the_provider_prefix(root: Path, server: ScriptedServer) -> None:
    write_config(root, '[model]\ndefault = "openai:scripted-model"\n')
    session = await prepared(root, requested_model=server.url, env={})
    await turn(session, "hi")
    assert server.chat_requests[-1]["model"] == "scripted-model"


async def test_url_model_without_a_name_asks_the_server(root: Path) -> None:
    with ScriptedServer(models=("qwen-7b", "other")) as srv:
        session = await prepared(root, requested_model=srv.url, env={})
        await turn(session, "hi")
        assert srv.chat_requests[-1]["model"] == "qwen-7b"


# -- item 4: the documented forms ----------------------------------------------------------------
async def test_openai_compatible_name_at_url(root: Path, server: ScriptedServer) -> None:
    session = await prepared(
        root, requested_model=f"openai-compatible:scripted-model@{server.url}", env={}
    )
    await turn(session, "hi")
    assert server.chat_requests[-1]["model"] == "scripted-model"


async def test_base_url_flag_with_bare_name(root: Path, server: ScriptedServer) -> None:
    session = await prepared(root, requested_model="my-llm", base_url=server.url, env={})
    await turn(session, "hi")
    assert server.chat_requests[-1]["model"] == "my-llm"


async def test_per_branch_models_reach_the_configured_server(
    root: Path, server: ScriptedServer
) -> None:
    """[fork.models] / picker names are resolved WITH the settings (they used to be resolved
    without them, so `openai:NAME` went to the public API)."""
    write_config(
        root,
        f'[model]\ndefault = "scripted-model"\nbase_url = "{server.url}"\n'
        '[fork.models]\n1 = "openai:branch-a"\n2 = "openai-compatible:branch-b"\n',
    )
    session = await prepared(root, env={})
    settings = session.settings
    specs = [
        BranchSpec(f"b{i}", "go", model=settings.model_for_branch(i)) for i in (1, 2, 3)
    ]
    coordinator = await session.start_fork(specs, None)
    statuses = await coordinator.wait(timeout=30)
    assert [s.state for s in statuses] == ["done"] * 3, [s.error for s in statuses]
    assert sorted(r["model"] for r in server.chat_requests) == [
        "branch-a", "branch-b", "scripted-model",
    ]
    await session.abort_fork()


def test_connect_model_names_the_missing_key() -> None:
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        connect_model("openai:gpt-6-luna", env={})
    model, reason = connect_or_offline("anthropic:claude-haiku-5-5", env={})
    assert is_offline(model) and reason and "ANTHROPIC_API_KEY" in reason


def test_server_push_queue_is_used(server: ScriptedServer) -> None:
    server.push(Reply.text("x"))
    assert server.queue and server.queue[0].chunks == ["x"]


# -- a server that wants a key (vLLM --api-key, a gateway) --------------------------------------
@pytest.mark.parametrize(
    ("config", "env"),
    [
        ('api_key_env = "VLLM_API_KEY"\n', {"VLLM_API_KEY": "sk-local-123"}),
        ("", {"FORKDECK_API_KEY": "sk-local-123"}),
    ],
)
async def test_server_key_comes_from_the_environment(
    root: Path, server: ScriptedServer, config: str, env: dict[str, str]
) -> None:
    write_config(root, f'[model]\nbase_url = "{server.url}"\ndefault = "scripted-model"\n{config}')
    session = await prepared(root, env=env)
    assert not is_offline(session.model), session.notices
    output, _ = await turn(session, "hi")
    assert output == "Hello from the server."
    assert server.authorizations[-1] == "Bearer sk-local-123"
    assert "sk-local-123" not in (root / ".pydantic-deep" / "config.toml").read_text()


def test_api_key_env_must_name_a_variable(root: Path) -> None:
    write_config(root, '[model]\napi_key_env = "sk-this-is-a-key"\n')
    loaded = load_settings(root)
    assert loaded.settings.api_key_env is None
    assert any("model.api_key_env" in str(problem) for problem in loaded.problems)
