"""``forkdeck models``: which model would be used, which keys are set, does the server answer.

Exit status 0 when the model in use resolves and every configured server answers
``GET /models``; 1 otherwise (the report says what is wrong).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from branching_core.cli._common import emit


def cmd_models(args: argparse.Namespace) -> int:
    from branching_core.agent.model_check import check_models
    from branching_core.agent.model_config import ModelConfig
    from branching_core.config import load_settings

    loaded = load_settings(Path(args.workspace))
    config = ModelConfig.from_settings(loaded.settings).with_overrides(base_url=args.base_url)
    report = check_models(
        config,
        requested=args.model,
        branch_models=loaded.settings.branch_models,
        timeout=args.timeout,
    )
    # every problem of the file, not only [model]'s: a broken file is not what runs
    report.config_problems = [p.message for p in loaded.problems]
    data = {"command": "models", **report.to_json()}
    emit(args, data, report.text())
    return 0 if report.ok else 1


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "models", parents=[common],
        help="show the configured model, the API keys set, and check the server answers",
    )
    p.add_argument("--model", help="check this model instead of [model] default")
    p.add_argument("--base-url", metavar="URL", help="OpenAI-compatible server to check")
    p.add_argument("--timeout", type=float, default=5.0,
                   help="seconds to wait for each server (default 5)")
    p.set_defaults(handler=cmd_models)
