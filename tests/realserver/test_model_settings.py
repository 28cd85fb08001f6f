"""The new model settings: ``[model] base_url / max_tokens / request_timeout /
first_token_timeout / max_concurrent_requests``, ``[fork] token_cap``, ``[fork.prices]``,
``--price``: read from a real file into ``ModelConfig``, bad values reported by key."""

from __future__ import annotations

from pathlib import Path

import pytest

from branching_core.agent.model_config import (
    DEFAULT_FIRST_TOKEN_TIMEOUT_S,
    ModelConfig,
    Price,
)
from branching_core.agent.spend import budget_rule
from branching_core.config import load_settings
from tests.realserver.helpers import write_config


def test_keys_reach_the_model_config(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        '[model]\ndefault = "qwen"\nbase_url = "http://127.0.0.1:8080/v1"\nmax_tokens = 512\n'
        "request_timeout = 30\nfirst_token_timeout = 5.5\nmax_concurrent_requests = 1\n"
        '[fork]\ntoken_cap = 9000\n[fork.prices]\n"qwen" = {input = 0.5, output = 1.5}\n',
    )
    loaded = load_settings(tmp_path)
    assert loaded.problems == []
    config = ModelConfig.from_settings(loaded.settings)
    assert (config.default, config.server_url) == ("qwen", "http://127.0.0.1:8080/v1")
    assert (config.max_tokens, config.request_timeout, config.first_token_timeout) == (
        512, 30.0, 5.5,
    )
    assert config.max_concurrent_requests == 1 and config.token_cap == 9000
    assert config.price_for("openai-compatible:qwen@http://x/v1") == Price(0.5, 1.5)
    assert budget_rule(0.1, "qwen", config).kind == "user_price"


def test_defaults_without_a_file(tmp_path: Path) -> None:
    config = ModelConfig.from_settings(load_settings(tmp_path).settings)
    assert config.first_token_timeout == DEFAULT_FIRST_TOKEN_TIMEOUT_S
    assert config.max_concurrent_requests is None and config.prices == {}


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("[model]\nmax_tokens = 0\n", "model.max_tokens"),
        ("[model]\nrequest_timeout = -1\n", "model.request_timeout"),
        ('[model]\nfirst_token_timeout = "soon"\n', "model.first_token_timeout"),
        ("[model]\nmax_concurrent_requests = 0\n", "model.max_concurrent_requests"),
        ('[model]\nbase_url = "localhost:8080"\n', "model.base_url"),
        ('[fork.prices]\n"m" = {input = -1, output = 1}\n', "fork.prices.m"),
        ('[fork.prices]\n"m" = 3\n', "fork.prices.m"),
        ('[model]\ndefault = "bare-name"\n', "model.default"),
    ],
)
def test_bad_values_are_reported_by_key(tmp_path: Path, text: str, key: str) -> None:
    write_config(tmp_path, text)
    problems = load_settings(tmp_path).problems
    assert [p.key for p in problems] == [key], problems


def test_price_flag() -> None:
    assert Price.parse("0.5/1.5") == Price(0.5, 1.5)
    assert Price.parse("2") == Price(2.0, 2.0)
    with pytest.raises(ValueError, match="IN/OUT"):
        Price.parse("cheap")
    config = ModelConfig().with_overrides(price="1/3", base_url="http://h/v1")
    assert config.price_for("anything") == Price(1.0, 3.0) and config.server_url == "http://h/v1"


def test_bad_price_flag_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from forkdeck.tui import main

    assert main([str(tmp_path), "--price", "cheap"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--price" in err and "IN/OUT" in err
