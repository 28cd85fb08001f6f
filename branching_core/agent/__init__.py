"""pydantic-ai glue: a workspace toolset bound to a directory, model selection, the offline model.

The fork coordinator builds one :func:`create_workspace_toolset` per branch (bound to the
branch's copy-on-write view) and resolves each branch's model with :func:`resolve_model`.
Importing this package imports pydantic-ai (the workspace layer never does); it never
imports ``textual``, ``rich`` or ``app``.
"""

from __future__ import annotations

from branching_core.agent.commands import (
    CommandOutcome,
    CommandRunner,
    LocalCommandRunner,
    OutputCallback,
    SandboxCommandRunner,
    sandbox_importable,
    truncate_middle,
)
from branching_core.agent.model_config import ModelConfig, Price
from branching_core.agent.model_errors import describe_error  # a failed request in one line
from branching_core.agent.models import (
    OFFLINE,
    ProviderInfo,
    config_resolver,
    connect_model,
    connect_or_offline,
    default_model,
    detect_providers,
    display_name,
    is_offline,
    openai_compatible_model,
    resolve_model,
    response_cost_usd,
)
from branching_core.agent.offline import OfflineModel, parse_script, plan_response
from branching_core.agent.paths import UnsafePathError, resolve_in_root
from branching_core.agent.spend import (  # what a chat's spend line and budget say
    budget_note,
    price_fn_for,
    usage_estimated,
)
from branching_core.agent.toolset import WorkspaceToolset, create_workspace_toolset

__all__ = [
    "OFFLINE",
    "CommandOutcome",
    "CommandRunner",
    "LocalCommandRunner",
    "ModelConfig",
    "OfflineModel",
    "OutputCallback",
    "Price",
    "ProviderInfo",
    "SandboxCommandRunner",
    "UnsafePathError",
    "WorkspaceToolset",
    "budget_note",
    "config_resolver",
    "connect_model",
    "connect_or_offline",
    "create_workspace_toolset",
    "default_model",
    "describe_error",
    "detect_providers",
    "display_name",
    "is_offline",
    "openai_compatible_model",
    "parse_script",
    "plan_response",
    "price_fn_for",
    "resolve_in_root",
    "resolve_model",
    "response_cost_usd",
    "sandbox_importable",
    "truncate_middle",
    "usage_estimated",
]
