"""What the user typed, and the commands that need no screen: parsing, the allow-list, settings.

Why apart from the screen: the rules (what ``>>a fix it`` means, which commands a live
fork allows, what ``/fork-budget aggregate 2`` writes) are plain functions here, tested
without a terminal. Which slash commands exist, what they take and which handler runs
them is declared once in ``app.command_registry``; :func:`resolve` checks a command
against it before ``app.chat.submission`` runs the handler.

Every problem is a :class:`CommandError` (or a ``ConfigError`` from the settings store)
whose message is one line, and nothing is written when a command is refused.
"""

from __future__ import annotations

from branching_core import ConfigError
from branching_core.config import SaveResult, SettingsStore

from .command_registry import REGISTRY, PaletteEntry, SlashCommand
from .parsed import Parsed, Prompt, Shell, Slash, Steer


class CommandError(ValueError):
    """A command that cannot run as typed; the message is the one line shown to the user."""


COMMANDS: dict[str, SlashCommand] = {command.name: command for command in REGISTRY}
"""Every slash command by name, in the order ``/help`` lists them (``fork diff`` is a
sub-command); declared in :mod:`app.command_registry`."""

ALLOWED_DURING_FORK = frozenset(c.name for c in REGISTRY if c.during_fork and " " not in c.name)
"""Seed 003's allow-list (plus ``/fork diff``, ``>>label`` and ``!cmd``): anything else would
start a new parent run under the branches' feet."""

BEFORE_READY = frozenset(c.name for c in REGISTRY if c.before_ready)
"""Slash commands that run at once even during start-up (nothing else is queued behind)."""


def palette_entries() -> list[PaletteEntry]:
    """Every slash command and setting, as the command palette lists them."""
    return REGISTRY.palette_entries()


def help_text() -> str:
    return REGISTRY.help_text()


def resolve(command: Slash) -> tuple[SlashCommand, Slash]:
    """The registered command ``command`` runs, and the command as its handler gets it (a
    sub-command's handler gets the words after it). A malformed one raises CommandError."""
    try:
        spec, args = REGISTRY.find(command.name, command.args)
    except KeyError:
        raise CommandError(f"unknown command /{command.name}; /help lists the commands") from None
    most = spec.args.most
    if most is not None and len(args) > most:
        takes = "no arguments" if most == 0 else f"at most {most} argument(s)"
        raise CommandError(f"usage: {spec.usage} (it takes {takes})")
    return spec, Slash(spec.name, args)


def parse_input(text: str) -> Parsed | None:
    """Classify one submitted line; None for a blank line."""
    stripped = text.strip()
    if not stripped:
        return None
    if stripped.startswith(">>"):
        body = stripped[2:].strip()
        label, _, message = body.partition(" ")
        if not label or not message.strip():
            raise CommandError("usage: >>label message (steers the running branch 'label')")
        return Steer(label, message.strip())
    if stripped.startswith("!"):
        command = stripped[1:].strip()
        if not command:
            raise CommandError("usage: !command (runs a shell command in the workspace)")
        return Shell(command)
    if stripped.startswith("/") and len(stripped) > 1 and not stripped.startswith("//"):
        words = stripped[1:].split()
        name = words[0].lower()
        if name not in REGISTRY:
            raise CommandError(f"unknown command /{words[0]}; /help lists the commands")
        return Slash(name, tuple(words[1:]))
    return Prompt(text)


def is_fork_diff(parsed: Parsed) -> bool:
    return isinstance(parsed, Slash) and parsed.name == "fork" and parsed.args[:1] == ("diff",)


def blocked_reason(parsed: Parsed, *, fork_active: bool, on_branch_tab: bool = False) -> str | None:
    """Why ``parsed`` may not run now, or None. Only a live fork blocks anything."""
    if not fork_active:
        if isinstance(parsed, Steer):
            return "no fork is running: >>label steers a branch of a live fork (/fork first)"
        if is_fork_diff(parsed):
            return "no fork is open: /fork diff compares the branches of a live fork"
        return None
    if isinstance(parsed, Steer):
        return None
    if isinstance(parsed, Shell) and not on_branch_tab:
        return (
            "a fork is open: !cmd on the overview would change the workspace under the "
            "branches; pick a branch tab to run it in that branch's sandbox, or /merge first"
        )
    if isinstance(parsed, Shell):
        return None
    if isinstance(parsed, Slash):
        try:
            found, _ = REGISTRY.find(parsed.name, parsed.args)
        except KeyError:
            return None  # an unknown command gets its own error from resolve()
        if found.during_fork:
            return None
        allowed = ", ".join(f"/{n}" for n in sorted(ALLOWED_DURING_FORK))
        return (
            f"/{parsed.name} is blocked while a fork is open (it would start a new run "
            f"under the branches); allowed: {allowed}, /fork diff, >>label, !cmd"
        )
    if isinstance(parsed, Prompt) and not on_branch_tab:
        return (
            "a fork is open: pick a branch tab (tab / alt+N) to talk to a finished branch, "
            "steer a running one with >>label message, or /merge"
        )
    return None


# ------------------------------------------------------------------------- settings commands

SETTINGS_COMMANDS = frozenset(c.name for c in REGISTRY if c.setting)


def _saved(message: str, result: SaveResult) -> str:
    if result.backup is not None:
        return f"{message} (the previous file was kept as {result.backup.name})"
    return message


def _usd(value: float | None) -> str:
    return "unset" if value is None else f"${value:.2f}"


def run_settings_command(store: SettingsStore, command: Slash) -> str:
    """Run ``/fork-branches``, ``/fork-budget`` or ``/fork-model``; returns the line to show.

    Written through to ``config.toml`` at once; a bad value raises (ConfigError or
    CommandError, one line) and leaves the file byte for byte as it was.
    """
    args = command.args
    if command.name == "fork-branches":
        if not args:
            return f"fork_branch_count = {store.settings.fork_branch_count}"
        if len(args) != 1:
            raise CommandError("usage: /fork-branches N")
        result = store.set_branch_count(args[0])
        return _saved(f"fork_branch_count = {store.settings.fork_branch_count}", result)
    if command.name == "fork-budget":
        return _budget(store, args)
    if command.name == "fork-model":
        return _model(store, args)
    raise CommandError(f"/{command.name} is not a settings command")


def _budget(store: SettingsStore, args: tuple[str, ...]) -> str:
    settings = store.settings
    if not args:
        return (
            f"per-branch budget = {_usd(settings.per_branch_budget_usd)}, "
            f"aggregate budget = {_usd(settings.aggregate_budget_usd)}"
        )
    if args == ("clear",):
        return _saved("budgets cleared", store.clear_budgets())
    usage = "usage: /fork-budget per-branch USD | aggregate USD | clear"
    if len(args) != 2:
        raise CommandError(usage)
    kind, value = args[0].lower(), args[1]
    if kind not in ("per-branch", "aggregate"):
        raise CommandError(f"unknown budget kind {args[0]!r}; {usage}")
    result = store.set_budget(kind, None if value.lower() == "clear" else value)
    settings = store.settings
    shown = (
        settings.per_branch_budget_usd if kind == "per-branch" else settings.aggregate_budget_usd
    )
    return _saved(f"{kind} budget = {_usd(shown)}", result)


def _model(store: SettingsStore, args: tuple[str, ...]) -> str:
    settings = store.settings
    if not args:
        if not settings.branch_models:
            return "no per-branch models; every branch runs the default model"
        return ", ".join(f"Branch {i} model = {m}" for i, m in settings.branch_models.items())
    if args == ("clear",):
        return _saved("every per-branch model cleared", store.clear_branch_models())
    if len(args) != 2:
        raise CommandError("usage: /fork-model I MODEL | I clear | clear")
    slot, model = args
    if not slot.isdigit():
        raise CommandError(f"branch slot must be a number from 1, got {slot!r}")
    if model.lower() == "clear":
        return _saved(f"Branch {slot} model cleared", store.clear_branch_model(slot))
    result = store.set_branch_model(slot, model)
    return _saved(f"Branch {int(slot)} model = {model}", result)


__all__ = [
    "ALLOWED_DURING_FORK",
    "BEFORE_READY",
    "COMMANDS",
    "SETTINGS_COMMANDS",
    "CommandError",
    "ConfigError",
    "PaletteEntry",
    "Parsed",
    "Prompt",
    "Shell",
    "Slash",
    "Steer",
    "blocked_reason",
    "help_text",
    "is_fork_diff",
    "palette_entries",
    "parse_input",
    "resolve",
    "run_settings_command",
]
