"""The handlers of the chat's slash commands (``/help``, ``/cost``, ``/copy``, settings, ...).

Why here: each is a few lines of screen work around state the session already has; the
table that names them (usage, help line, allow-list) is ``app.command_registry``.
"""

from __future__ import annotations

import platform
from typing import TYPE_CHECKING

from branching_core import ConfigError

from ..chat_store import save_history
from ..commands import CommandError, help_text, run_settings_command

if TYPE_CHECKING:
    from ..commands import Slash
    from .ports import ChatHost


def show_help(screen: ChatHost, command: Slash) -> None:
    screen.notice(help_text())


def setting(screen: ChatHost, command: Slash) -> None:
    """``/fork-branches``, ``/fork-budget``, ``/fork-model``: written through at once."""
    try:
        screen.notice(run_settings_command(screen.session.settings_store, command))
    except (CommandError, ConfigError) as exc:
        screen.notice(str(exc), "error")


def show_cost(screen: ChatHost, command: Slash) -> None:
    session = screen.session
    totals = session.totals
    lines = [f"chat: ${totals.cost_usd:.4f} over {totals.requests} requests"]
    if totals.unpriced_responses:
        lines.append(f"  ({totals.unpriced_responses} responses of a model with no known price)")
    coordinator = session.coordinator
    if coordinator is not None and session.fork_active:
        summary = coordinator.fork_cost()
        agg = "price unknown" if summary.aggregate_usd is None else f"${summary.aggregate_usd:.4f}"
        cap = summary.aggregate_budget_usd
        lines.append(f"fork {summary.fork_id}: {agg}" + (f" of ${cap:.2f}" if cap else ""))
        for branch in summary.branches:
            spent = (
                "price unknown"
                if branch.cumulative_usd is None
                else f"${branch.cumulative_usd:.4f}"
            )
            budget = f" / ${branch.budget_usd:.2f}" if branch.budget_usd else ""
            lines.append(f"  {branch.label}: {spent}{budget} ({branch.requests} requests)")
    screen.notice("\n".join(lines))


def show_tokens(screen: ChatHost, command: Slash) -> None:
    session = screen.session
    totals = session.totals
    fork = session.fork_totals() if session.fork_active else None
    line = f"chat: {totals.input_tokens:,} in / {totals.output_tokens:,} out"
    if fork is not None:
        line += f"; fork: {fork.input_tokens:,} in / {fork.output_tokens:,} out"
    screen.notice(line)


def show_version(screen: ChatHost, command: Slash) -> None:
    from importlib import metadata  # not at import: it costs the first frame ~15 ms

    def version(dist: str) -> str:
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "?"

    screen.notice(
        f"forkdeck {version('forkdeck')} · pydantic-ai {version('pydantic-ai-slim')} · "
        f"textual {version('textual')} · python {platform.python_version()}"
    )


def copy(screen: ChatHost, command: Slash) -> None:
    """The chat's last answer; on a branch tab, that branch's whole transcript."""
    area = screen.fork_area
    label = area.active_label if area is not None else None
    if area is not None and label is not None:
        panel = area.panel(label)
        text, what = panel.transcript_text + panel.pending_text, f"branch {label}'s transcript"
    else:
        text, what = screen.messages.last_assistant_text(), "the last answer"
    if not text:
        screen.notice("nothing to copy yet", "warning")
        return
    screen.copy_to_clipboard(text)
    screen.notice(f"copied {what}: {len(text)} characters", toast=True)


def clear(screen: ChatHost, command: Slash) -> None:
    if screen.turn_running:
        screen.notice("a turn is running: esc first", "warning")
        return
    session = screen.session
    session.history = []
    screen.messages.clear_messages()
    if (session.root / ".pydantic-deep" / "sessions").exists():
        save_history(session.root, [])  # --resume starts from the new one too
    screen.notice("new conversation")


def quit_app(screen: ChatHost, command: Slash) -> None:
    screen.request_quit()
