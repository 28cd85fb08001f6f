"""Fixtures for tests against the scripted OpenAI-compatible HTTP server (loopback only)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.openai_server import ScriptedServer


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    with ScriptedServer() as srv:
        yield srv


@pytest.fixture(autouse=True)
def _no_real_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test here may reach a hosted provider: drop every real key from the environment."""
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OLLAMA_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
