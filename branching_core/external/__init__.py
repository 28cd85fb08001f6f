"""External CLI agents (Claude Code, Codex CLI, aider, Gemini CLI, any command) raced in
copy-on-write branches: a front door that uses only the engine's public API.

``profiles`` (what to run and what it may see), ``runner`` (one agent in one branch on a
pseudo-terminal), ``race`` (several agents, budgets, tests, the pick, landing), ``pick``
(tests / judge / manual), ``ptyhost.py`` (the terminal inside the sandbox).
"""

from typing import TYPE_CHECKING

from branching_core._lazy import lazy_exports
from branching_core.external.profiles import (
    BUILTIN,
    AgentProfile,
    Exposed,
    ProfileError,
    available_profiles,
    resolve_profile,
    resolve_row,
)
from branching_core.external.race import AgentRace, BranchReport, RaceOutcome
from branching_core.external.runner import AgentRun, RunStatus

if TYPE_CHECKING:  # loaded on first use (``__getattr__``)
    from branching_core.external.fork_runner import ExternalAgentRunner as ExternalAgentRunner

_LAZY: dict[str, str] = {
    # external agents as fork branches (the TUI's /fork with agent rows)
    "ExternalAgentRunner": "branching_core.external.fork_runner",
}

__all__ = [
    "BUILTIN",
    "AgentProfile",
    "AgentRace",
    "AgentRun",
    "BranchReport",
    "Exposed",
    "ExternalAgentRunner",
    "ProfileError",
    "RaceOutcome",
    "RunStatus",
    "available_profiles",
    "resolve_profile",
    "resolve_row",
]

__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals(), __all__)
