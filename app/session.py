"""``ChatSession``: the TUI's controller, with no widget in it.

Why a class apart from the screen: everything the user can do (chat, fork, steer, merge,
change settings) is a call on this object, so Pilot tests can assert on real state (the
history, the coordinator's branches, the files) and the screen stays a thin view.

Start-up is split in two so the first frame never waits for pydantic-ai: the constructor
only reads the settings file (stdlib); :meth:`prepare` (run in a worker thread after the
first frame) opens the workspace, imports pydantic-ai, resolves the model and builds the
parent ``Agent``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from branching_core.config import ConfigProblem, Settings, SettingsStore

from .chat.turn_stream import TurnSink, stream_text, tool_event
from .fork_totals import ForkTotals
from .model_env import MODEL_ENV_KEYS

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel

    from branching_core import MergeAction
    from branching_core.fork import BranchSpec, ForkCoordinator, MergeResult
    from branching_core.workspace import Workspace


@dataclass
class Totals:
    """What the parent run and resolved forks cost so far (unknown prices are counted apart)."""

    cost_usd: float = 0.0
    unpriced_responses: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0
    tokens_estimated: bool = False
    """A server sent no usage: some counts are estimated from the text (never a false 0)."""

    def add_response(self, response: Any) -> None:
        from branching_core.agent import response_cost_usd, usage_estimated

        self.requests += 1
        usage = getattr(response, "usage", None)
        self.input_tokens += int(getattr(usage, "input_tokens", 0) or 0)
        self.output_tokens += int(getattr(usage, "output_tokens", 0) or 0)
        self.tokens_estimated = self.tokens_estimated or usage_estimated(usage)
        cost = response_cost_usd(response)
        if cost is None:
            self.unpriced_responses += 1
        else:
            self.cost_usd += cost


@dataclass
class StartupNotice:
    """Something the user must read at start: ``severity`` follows Textual's notify."""

    message: str
    severity: SeverityLevel = "information"


@dataclass
class ChatSession:
    """One TUI session on one workspace (see the module docstring)."""

    root: Path
    requested_model: Any = None
    backend: str | None = None
    model_resolver: Callable[[str], Any] | None = None
    judges: list[Any] | None = None
    """Judge models for ``/merge`` under a judge strategy (None: the strategy's own)."""
    subagents: Any = None
    """A ``SubAgentBranches`` registry (seed 002) the parent agent may delegate to; its runs
    show as expandable ``branch`` tool calls. Without a workspace of its own it uses ours."""
    env: dict[str, str] | None = None
    base_url: str | None = None
    """``--base-url``: an OpenAI-compatible server for every model name (over ``[model]``)."""
    price: str | None = None
    """``--price IN/OUT``: USD per million tokens for a model without a listed price."""
    settings_store: SettingsStore = field(init=False)
    workspace: Workspace | None = field(init=False, default=None)
    model: Any = field(init=False, default=None)
    model_label: str = field(init=False, default="loading…")
    offline: bool = field(init=False, default=False)
    agent: Any = field(init=False, default=None)
    history: list[Any] = field(init=False, default_factory=list)
    merged_messages: list[Any] = field(init=False, default_factory=list)
    """What the last merge added to the chat's history (the chat appends these)."""
    on_busy: Callable[[str | None], None] | None = field(init=False, default=None)
    """Told what long wait is in front now (a label) and when none is left (None): the
    status line's spinner, the app's one display of waits."""
    busy_labels: list[str] = field(init=False, default_factory=list)
    """The waits under way, innermost last (the one shown): the one source of truth for
    "busy", whether the session or a screen flow started the wait."""
    branch_tests: dict[str, str] = field(init=False, default_factory=dict)
    """label -> one line of the configured ``test_command``'s result in that branch."""
    coordinator: ForkCoordinator | None = field(init=False, default=None)
    totals: Totals = field(init=False, default_factory=Totals)
    notices: list[StartupNotice] = field(init=False, default_factory=list)
    ready: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        self.settings_store = SettingsStore(self.root)

    # -- settings ------------------------------------------------------------------------
    @contextlib.contextmanager
    def busy(self, label: str) -> Iterator[None]:
        """Announce a wait of seconds (spawning, a merge waiting on a branch, the judge).

        Waits nest (a screen flow around a session call): the innermost is shown, and the
        one around it again once the inner one ends.
        """
        self.busy_labels.append(label)
        self._tell_busy()
        try:
            yield
        finally:
            self.busy_labels.remove(label)
            self._tell_busy()

    @property
    def busy_label(self) -> str | None:
        """The wait shown now (None: nothing long is under way)."""
        return self.busy_labels[-1] if self.busy_labels else None

    def _tell_busy(self) -> None:
        if self.on_busy is not None:
            self.on_busy(self.busy_label)

    @property
    def settings(self) -> Settings:
        return self.settings_store.settings

    @property
    def config_problems(self) -> list[ConfigProblem]:
        return self.settings_store.problems

    @property
    def backend_label(self) -> str:
        return self.workspace.fstype if self.workspace is not None else "…"

    # -- start-up (worker thread) --------------------------------------------------------
    def prepare(self) -> list[StartupNotice]:
        """Open the workspace, resolve the model, build the agent; returns what to tell the user.

        A model that cannot be used (bad ``--model``, missing SDK) never stops the session:
        it falls back to the offline model and says why and how to fix it.
        """
        import pydantic_ai
        from pydantic_ai import Agent

        from branching_core.agent import connect_or_offline, display_name, is_offline
        from branching_core.workspace import Workspace

        # The TUI owns the terminal: pydantic-ai's first-run banner would print over it.
        pydantic_ai.BANNER_ENABLED = False
        notices: list[StartupNotice] = []
        backend = self.backend or self.settings.backend
        self.workspace = Workspace(self.root, backend=backend)
        # A model that cannot be used (no API key, unknown name) never wedges the session.
        self.model, problem = connect_or_offline(
            self.requested_model, self.model_config, env=self.env
        )
        if problem is not None:
            notices.append(
                StartupNotice(f"model: {problem}; using the offline model instead", "error")
            )
        self.offline = is_offline(self.model)
        self.model_label = display_name(self.model)
        if self.offline:
            notices.append(StartupNotice(offline_greeting(), "warning"))
        from branching_core.sandbox import unprivileged_limits

        gives_up = unprivileged_limits(self.workspace.fstype)
        if gives_up:  # issue 24.15: said once, not met later as errors
            notices.append(
                StartupNotice("unprivileged (not root): " + "; ".join(gives_up), "warning")
            )
        capabilities: list[Any] = []
        if self.subagents is not None:
            if self.subagents.workspace is None:
                self.subagents.workspace = self.workspace
            capabilities.append(self.subagents)
        # No agent-level instructions: every run gets the workspace toolset, whose instructions
        # are the same text (giving both sent two identical system messages per request).
        self.agent = Agent(self.model, name="forkdeck", capabilities=capabilities)
        self.ready = True
        self.notices = notices
        return notices

    @property
    def model_config(self) -> Any:
        """``[model]``/``[fork.prices]`` settings with ``--base-url``/``--price`` applied."""
        from branching_core.agent import ModelConfig

        return ModelConfig.from_settings(self.settings, env=self.env).with_overrides(
            base_url=self.base_url, price=self.price
        )

    def budget_note(self) -> str | None:
        """How budgets are enforced for the chat model (listed price, your price, token cap)."""
        from branching_core.agent import budget_note
        from branching_core.fork import model_label_for_budget

        return budget_note(model_label_for_budget(self.model), self.model_config)

    def workspace_toolset(self) -> Any:
        from branching_core.agent import create_workspace_toolset

        return create_workspace_toolset(self.root)

    # -- the parent chat -----------------------------------------------------------------
    async def run_turn(self, prompt: str, sink: TurnSink) -> str | None:
        """One parent turn, streamed into ``sink``; the history grows only by what happened.

        Cancelling the task (Esc) keeps the messages so far, with unanswered tool calls
        trimmed, so the next turn (or a fork) starts from a valid history.
        """
        from pydantic_ai import Agent

        from branching_core.fork import trim_unanswered_tool_calls

        if self.agent is None:
            raise RuntimeError("the session is still starting")
        run: Any = None
        try:
            async with self.agent.iter(
                prompt, message_history=list(self.history), toolsets=[self.workspace_toolset()]
            ) as run:
                async for node in run:
                    if Agent.is_model_request_node(node):
                        async with node.stream(run.ctx) as stream:
                            async for event in stream:
                                stream_text(event, sink)
                    elif Agent.is_call_tools_node(node):
                        self.totals.add_response(node.model_response)
                        async with node.stream(run.ctx) as stream:
                            async for event in stream:
                                tool_event(event, sink)
            assert run.result is not None
            self.history = list(run.result.all_messages())
            output = run.result.output
            return output if isinstance(output, str) else repr(output)
        except (asyncio.CancelledError, Exception):
            if run is not None:
                self.history = trim_unanswered_tool_calls(list(run.all_messages()))
            raise

    # -- forks -----------------------------------------------------------------------------
    @property
    def fork_active(self) -> bool:
        return self.coordinator is not None and not self.coordinator.is_resolved

    def new_coordinator(self) -> ForkCoordinator:
        from branching_core.live import ForkCoordinator

        assert self.workspace is not None
        return ForkCoordinator(
            self.agent,
            workspace=self.workspace,
            max_branches=self.settings.max_branches,
            max_depth=self.settings.max_depth,
            default_model=self.model,
            **self._model_options(),
            stream_text=True,
            materialize=True,
            approval_required=self.approval_policy(),
            external_runner=self.external_runner(),
            network=self.network_setup(),
        )

    def external_runner(self) -> Any:
        """Runs the fork rows whose model is ``agent:<profile>`` (``[agents.<name>]``)."""
        from branching_core.external import ExternalAgentRunner

        assert self.workspace is not None
        return ExternalAgentRunner(self.workspace.path, getattr(self.settings, "agents", {}))

    def network_setup(self) -> Any:
        """``[sandbox] network`` and ``[services.*]`` for this session's branches (agents:
        ``private`` by default; see docs/network.md)."""
        from branching_core.sandbox import network_setup

        return network_setup(self.settings, purpose="agent")

    def _model_options(self) -> dict[str, Any]:
        """Per-branch models reach the configured server; user prices count in budgets."""
        from branching_core.agent import config_resolver, price_fn_for

        config = self.model_config
        return {
            "model_resolver": self.model_resolver or config_resolver(config, env=self.env),
            "price_fn": price_fn_for(config),
        }

    def approval_policy(self) -> Any:
        """``[fork] approval_required`` as the coordinator takes it: tool names, True for
        ``"*"`` (every workspace tool), None when nothing needs approval."""
        names = tuple(getattr(self.settings, "approval_required", ()) or ())
        if not names:
            return None
        return True if "*" in names else list(names)

    def diff_paths(self) -> Any:
        """Where the diff tool looks for the open fork: its live mirror
        (``.pydantic-deep/forks/<id>/parent/`` and ``branches/<label>/``, brought up to date
        first), never the live workspace or a helper process's view; None with no fork."""
        from .review.merge_diff import DiffPaths

        coordinator = self.coordinator
        if coordinator is None or coordinator.fork_id is None:
            return None
        return DiffPaths.for_coordinator(coordinator)

    async def start_fork(
        self, specs: list[BranchSpec], aggregate_budget_usd: float | None
    ) -> ForkCoordinator:
        """Spawn the branches from the current history; returns the live coordinator."""
        from branching_core.fork import MergeStrategy

        if self.fork_active:
            raise RuntimeError("a fork is already open: /merge it (or Esc on overview) first")
        left_open = self.open_forks()
        if left_open:
            # A second fork over one still open on disk would leave the first unreachable
            # and later merge over it: reopen, merge or abort that one first.
            raise RuntimeError(
                f"fork {left_open[0]['fork_id']} from an earlier session is still open: "
                "/fork offers to reopen, merge or abort it"
            )
        seed = self.history
        if specs and all(not spec.steer.strip() for spec in specs):
            seed = resample_seed(self.history)
        coordinator = self.new_coordinator()
        strategy = MergeStrategy(
            kind=self.settings.merge_strategy,
            confidence_threshold=self.settings.confidence_threshold,
        )
        with self.busy(f"spawning {len(specs)} branch{'es' if len(specs) != 1 else ''}"):
            await coordinator.fork(
                specs,
                parent_history=seed,
                aggregate_budget_usd=aggregate_budget_usd,
                strategy=strategy,
            )
        self.coordinator = coordinator
        return coordinator

    def fork_totals(self) -> ForkTotals:
        if self.coordinator is None or self.coordinator.handle is None:
            return ForkTotals()
        summary = self.coordinator.fork_cost()
        return ForkTotals(
            summary.aggregate_usd or 0.0,
            sum(b.input_tokens for b in summary.branches),
            sum(b.output_tokens for b in summary.branches),
            any(b.tokens_estimated for b in summary.branches),
        )

    # -- resolving the fork: app.merge.resolution does the work ---------------------------
    def judge_unavailable(self) -> str | None:
        """Why the judge cannot run (no LLM for it), or None when it can."""
        from .merge import resolution

        return resolution.judge_unavailable(self)

    async def run_judge(self) -> Any:
        """``branching_core.review.resolve`` on the open fork (see ``app.merge.resolution``)."""
        from .merge import resolution

        return await resolution.run_judge(self)

    async def merge(self, action: MergeAction | str, **options: Any) -> MergeResult:
        """Resolve the fork; a picked winner's history becomes the chat's history. A winner
        colliding with the parent is refused first (``MergeConflict``; nothing changes).
        ``options`` go to ``merge_or_select`` ("combine"'s selection/base, issue 17.1)."""
        from .merge import resolution

        return await resolution.merge(self, action, **options)

    def adopt_merge(self, result: MergeResult) -> MergeResult:
        """Take over a merge someone else ran on our coordinator (the judge's ``auto``)."""
        from .merge import resolution

        return resolution.adopt_merge(self, result)

    async def abort_fork(self) -> list[str]:
        if self.coordinator is None:
            return []
        spent = self.fork_totals()
        ids = await self.coordinator.abort_fork()
        self.settle_fork(spent)
        return ids

    def settle_fork(self, spent: ForkTotals) -> None:
        """Fold a resolved fork's spend into the session totals and drop the coordinator."""
        self.totals.cost_usd += spent.cost_usd
        self.totals.input_tokens += spent.input_tokens
        self.totals.output_tokens += spent.output_tokens
        self.totals.tokens_estimated = self.totals.tokens_estimated or spent.tokens_estimated
        self.branch_tests = {}
        coordinator, self.coordinator = self.coordinator, None
        if coordinator is not None and coordinator.fork_id is not None:
            from branching_core.workspace import rmtree

            from .review.merge_diff import PLACEHOLDER_DIR

            rmtree(coordinator.store.fork_dir(coordinator.fork_id) / PLACEHOLDER_DIR)

    def adopt_recovered(self, fork_id: str) -> ForkCoordinator | None:
        """Rebuild the forks a crashed session left open; keep the top-level one ``fork_id``."""
        from branching_core.live import ForkCoordinator

        assert self.workspace is not None
        found = ForkCoordinator.recover(
            self.workspace,
            self.agent,
            default_model=self.model,
            **self._model_options(),
            stream_text=True,
            materialize=True,
            approval_required=self.approval_policy(),
            external_runner=self.external_runner(),
            network=self.network_setup(),
        )
        for coordinator in found:
            if coordinator.fork_id == fork_id:
                self.coordinator = coordinator
                return coordinator
        return None

    def open_forks(self) -> list[dict[str, Any]]:
        """Top-level forks left open in this workspace by an earlier session."""
        from branching_core.fork import list_open_forks

        assert self.workspace is not None
        return [m for m in list_open_forks(self.workspace) if int(m.get("depth", 1)) == 1]

    def forks_left_open_on_disk(self) -> list[dict[str, Any]]:
        """:meth:`open_forks` from the manifests alone (no workspace, no pydantic-ai): what the
        recovery dialog lists right after the first frame. A fork still being created when
        its process died is left to :meth:`open_forks`' sweep."""
        from .fork.left_open import forks_left_open

        return forks_left_open(self.root)

    async def aclose(self) -> None:
        """Stop running branch tasks; the fork itself stays on disk for recovery at next start.

        Quitting must not silently throw the branches away: an open fork is offered for
        merge or abort the next time forkdeck opens this workspace.
        """
        coordinator = self.coordinator
        if coordinator is None or coordinator.is_resolved:
            return
        for status in coordinator.inspect_branches():
            if status.state == "running":
                await coordinator.terminate_branch(status.branch_id)
        await coordinator.flush()
        await coordinator.release_networks()  # services, forwards: not past this session
        # The mirror's watcher thread stops with the session; the mirror itself stays on
        # disk (recovery rebuilds it), like the fork.
        hook = getattr(coordinator, "mirror_hook", None)
        if hook is not None:
            hook.detach()


def resample_seed(history: list[Any]) -> list[Any]:
    """The history up to and including the last request the user typed, without the answer:
    a fork with every steer empty re-runs that turn in each branch (best-of-N, issue 24.7).

    Raises ``RuntimeError`` when the chat has no task yet to run again."""
    from pydantic_ai.messages import ModelRequest, UserPromptPart

    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if isinstance(message, ModelRequest) and any(
            isinstance(part, UserPromptPart) for part in message.parts
        ):
            return list(history[: index + 1])
    raise RuntimeError(
        "every steer is empty and the chat has no task yet to run again: "
        "type the task first, or a steer per row"
    )


def offline_greeting() -> str:
    """The first words a user without an LLM reads: what works now and how to get a real one."""
    keys = ", ".join(MODEL_ENV_KEYS)
    return (
        "New here? `forkdeck demo` forks three fixes of a failing test and opens the merge "
        "picker (offline, one minute).\n"
        "No LLM configured: the offline model (scripted, no network) answers. It turns a "
        "prompt into tool calls (`ls`, `read PATH`, `glob PATTERN`, `grep REGEX`, and "
        "`write PATH` with the file's lines below it up to a line `end`: ctrl+j starts a "
        "new line, a paste keeps them all); in a /fork steer, `!cmd` makes that branch run "
        "a shell command. "
        f"For a real model set one of {keys}, start with `--model provider:name` "
        "(or `--model openai-compatible:NAME@http://host:port/v1` for a local server), "
        "or set `default` under [model] in .pydantic-deep/config.toml; recipes: README "
        'section "Use a real model"; `forkdeck models` checks the setup.'
    )


def env_has_model_key(env: dict[str, str] | None = None) -> bool:
    source = os.environ if env is None else env
    return any(source.get(k, "").strip() for k in MODEL_ENV_KEYS)


__all__ = [
    "MODEL_ENV_KEYS",
    "ChatSession",
    "ForkTotals",
    "StartupNotice",
    "Totals",
    "TurnSink",
    "env_has_model_key",
    "offline_greeting",
    "resample_seed",
]
