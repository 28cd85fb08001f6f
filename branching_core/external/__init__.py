"""External CLI agents (Claude Code, Codex CLI, aider, Gemini CLI, any command) raced in
copy-on-write branches: a front door that uses only the engine's public API.

``profiles`` (what to run and what it may see), ``runner`` (one agent in one branch on a
pseudo-terminal), ``race`` (several agents, budgets, tests, the pick, landing), ``pick``
(tests / judge / manual), ``ptyhost.py`` (the terminal inside the sandbox).
"""

from branching_core.external.profiles import (
    BUILTIN,
    AgentProfile,
    Exposed,
    ProfileError,
    available_profiles,
    resolve_profile,
)
from branching_core.external.race import AgentRace, BranchReport, RaceOutcome
from branching_core.external.runner import AgentRun, RunStatus

__all__ = [
    "BUILTIN",
    "AgentProfile",
    "AgentRace",
    "AgentRun",
    "BranchReport",
    "Exposed",
    "ProfileError",
    "RaceOutcome",
    "RunStatus",
    "available_profiles",
    "resolve_profile",
]
