"""A fork coordinator whose branches talk to the scripted server through pydantic-ai's real
OpenAI provider (``connect_model``), as the TUI builds it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic_ai import Agent

from branching_core.agent.model_config import ModelConfig
from branching_core.agent.models import config_resolver, connect_model
from branching_core.agent.spend import price_fn_for
from branching_core.fork import ForkCoordinator
from branching_core.fork import events as ev
from branching_core.workspace import Workspace
from tests.support.openai_server import ScriptedServer


def server_config(server: ScriptedServer, **limits: Any) -> ModelConfig:
    return replace(ModelConfig(default="scripted-model", base_url=server.url), **limits)


def coordinator(root: Path, config: ModelConfig) -> tuple[ForkCoordinator, list[Any]]:
    """A streaming coordinator on ``root`` and the list its events go to."""
    model = connect_model(None, config, env={})
    agent = Agent(model, name="forkdeck-test")
    coord = ForkCoordinator(
        agent,
        workspace=Workspace(root, backend="copy"),
        default_model=model,
        model_resolver=config_resolver(config, env={}),
        price_fn=price_fn_for(config),
        stream_text=True,
    )
    seen: list[Any] = []
    coord.add_listener(seen.append)
    return coord, seen


def texts(events: list[Any], label: str) -> str:
    return "".join(e.text for e in events if isinstance(e, ev.BranchTextDelta) and e.label == label)
