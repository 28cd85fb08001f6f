"""``ExternalAgentRunner``: runs a fork branch whose model is ``agent:<profile>``.

Handed to the fork coordinator as ``ForkOptions.external_runner`` (the fork layer's
``ExternalBranchRunner`` protocol): the branch's workspace branch is the fork's own, so
``/merge``, the diff explorer, combine, the mirror and the judge see the agent's files
exactly as they see a pydantic-ai branch's. The agent runs at the workspace's own path,
on a terminal of ``cols`` x ``rows``; each line it writes goes to ``on_line``. A row's
``agent:claude@SESSION`` forks that saved session into a new one in the branch (the
conversation so far, the files as they are now).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from branching_core.external.profiles import AgentProfile, resolve_row
from branching_core.external.runner import AgentRun


class ExternalAgentRunner:
    """See the module docstring; ``configured`` are ``[agents.<name>]`` settings."""

    def __init__(self, workspace_path: Any, configured: Mapping[str, Any] | None = None, *,
                 cols: int = 100, rows: int = 30, session: str | None = None) -> None:
        self.workspace_path = workspace_path
        self.configured = dict(configured or {})
        self.cols = cols
        self.rows = rows
        self.session = session  # a live session every agent resumes into a new one

    def profile(self, model: str) -> tuple[AgentProfile, str | None]:
        """``agent:NAME`` or ``agent:NAME@SESSION`` (fork that live session)."""
        return resolve_row(model.split(":", 1)[1], self.configured)

    async def run(self, rt: Any, prompt: str, on_line: Callable[[str], None],
                  on_start: Callable[[Any], None]) -> tuple[int | None, str | None]:
        profile, session = self.profile(str(rt.spec.model))
        if session is None and profile.resume is not None:
            session = self.session
        run = AgentRun(rt.label, profile, rt.ws_branch, prompt, mount_at=self.workspace_path,
                       session=session, on_line=lambda _label, line: on_line(line),
                       cols=self.cols, rows=self.rows)
        on_start(run)
        try:
            while not run.poll():
                if profile.timeout_s is not None and run.duration > profile.timeout_s:
                    run.kill("timed-out", f"over its {profile.timeout_s:g} s budget")
                    break
                budget = profile.cost_budget_usd or getattr(rt.spec, "budget_usd", None)
                if budget is not None and (run.cost_usd or 0.0) > budget:
                    run.kill("over-budget", f"reported ${run.cost_usd:.4f} > ${budget:g}")
                    break
                await asyncio.sleep(0.05)
        finally:
            run.close()  # cancelled (Esc, terminate): the whole tree dies here
        if run.cost_usd is not None:  # what the agent reported: the branch's cost
            rt.meter.cost_usd = run.cost_usd
        return run.status.exit_code, run.status.error


__all__ = ["ExternalAgentRunner"]
