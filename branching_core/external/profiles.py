"""Agent profiles: how to run one external CLI agent headless in a branch sandbox.

A profile says which command to run (``{prompt}`` is replaced by the prompt as one
argument; without it the prompt is typed on the agent's terminal, then end-of-file),
how to resume a saved session into a new one (``resume``, with ``{session}`` and
``{prompt}``), whether the agent gets the network (agents call their model APIs: on by
default), what of the masked home it may see (``expose``: the sandbox hides the home and
every credential store; a profile names exactly the paths its agent needs, each
read-only or read-write), which environment variables pass through (``env``: names or
``NAME*`` globs; ``NAME=value`` sets one), and its limits.

Built in: ``claude`` (Claude Code), ``codex`` (Codex CLI), ``aider``, ``gemini`` (Gemini
CLI), and ``cmd:<command line>`` for anything else. ``[agents.<name>]`` in
``.pydantic-deep/config.toml`` overrides a built-in's fields or defines a new profile
(see ``branching_core.config.schema.AgentProfileSettings``).
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from branching_core.errors import BranchingError

if TYPE_CHECKING:  # only the standard library at run time (the settings are duck-typed)
    from branching_core.config.schema import AgentProfileSettings

#: Environment every agent gets (no secrets: locale, terminal, paths, identity).
BASE_ENV = ("PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_*", "TZ",
            "TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "TMPDIR", "XDG_RUNTIME_DIR",
            "http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
            "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE",
            "VIRTUAL_ENV")

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\*?$")


class ProfileError(BranchingError, ValueError):
    """A profile name or command that cannot be used (one line, for the user)."""


@dataclass(frozen=True)
class Exposed:
    """A path the masked sandbox shows anyway; ``~`` is the user's home."""

    path: str
    writable: bool = False
    create: bool = False  # a read-write directory made (0700) when it does not exist yet

    def resolved(self, home: str) -> str:
        if self.path == "~" or self.path.startswith("~/"):
            return os.path.join(home, self.path[2:]) if self.path != "~" else home
        return self.path


@dataclass(frozen=True)
class AgentProfile:
    """One way to run an external agent (see the module docstring)."""

    name: str
    command: tuple[str, ...]
    resume: tuple[str, ...] | None = None
    network: bool = True
    expose: tuple[Exposed, ...] = ()
    env: tuple[str, ...] = ()
    steer: bool = True  # whether it reads its terminal while it works (``>>label`` steers)
    timeout_s: float | None = None
    cost_budget_usd: float | None = None
    memory: str | None = None
    cpu: float | None = None
    pids: int | None = None
    description: str = ""
    cost_patterns: tuple[str, ...] = field(default=(
        r'"total_cost_usd"\s*:\s*([0-9.]+)',
        r'"cost_usd"\s*:\s*([0-9.]+)',
    ))

    @property
    def prompt_on_stdin(self) -> bool:
        return not any("{prompt}" in part for part in self.command)

    def argv(self, prompt: str, session: str | None = None) -> list[str]:
        """The command line for ``prompt`` (resuming ``session`` into a new one when given
        and the profile can); every placeholder fills one argument, never a shell."""
        template = self.command
        if session is not None:
            if self.resume is None:
                raise ProfileError(f"agent {self.name!r} cannot resume a session")
            template = self.resume
        values = {"prompt": prompt, "session": session or ""}
        return [_fill(part, values) for part in template]

    def environment(self, source: Mapping[str, str] | None = None) -> dict[str, str]:
        """The agent's environment: ``BASE_ENV`` and the profile's ``env`` entries only
        (another provider's key never reaches it)."""
        source = os.environ if source is None else source
        out: dict[str, str] = {}
        patterns = [*BASE_ENV, *(e for e in self.env if "=" not in e)]
        for name, value in source.items():
            if any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns):
                out[name] = value
        for entry in self.env:
            if "=" in entry:
                name, value = entry.split("=", 1)
                out[name] = value
        return out

    def exposed_paths(self, home: str | None = None) -> list[tuple[str, bool]]:
        """``(absolute path, writable)`` for the sandbox; read-write directories marked
        ``create`` are made first (an agent's first run must be able to save its session)."""
        home = home or os.path.expanduser("~")
        out = []
        for item in self.expose:
            path = item.resolved(home)
            if item.create and item.writable and not os.path.lexists(path):
                os.makedirs(path, mode=0o700, exist_ok=True)
            out.append((path, item.writable))
        return out


def _fill(part: str, values: Mapping[str, str]) -> str:
    return re.sub(r"\{(prompt|session)\}", lambda m: values[m.group(1)], part)


def _split(text: str, what: str) -> tuple[str, ...]:
    try:
        parts = tuple(shlex.split(text))
    except ValueError as exc:
        raise ProfileError(f"{what}: cannot split {text!r}: {exc}") from None
    if not parts:
        raise ProfileError(f"{what}: empty command")
    return parts


_CLAUDE_ENV = ("ANTHROPIC_*", "CLAUDE_*", "AWS_REGION", "AWS_PROFILE", "CLOUD_ML_REGION",
               "DISABLE_*", "MCP_*", "IS_SANDBOX")
_OPENAI_ENV = ("OPENAI_*", "CODEX_*", "AZURE_OPENAI_*")

BUILTIN: dict[str, AgentProfile] = {
    "claude": AgentProfile(
        "claude",
        ("claude", "-p", "{prompt}", "--permission-mode", "acceptEdits",
         "--output-format", "stream-json", "--verbose"),
        resume=("claude", "-p", "{prompt}", "--resume", "{session}", "--fork-session",
                "--permission-mode", "acceptEdits", "--output-format", "stream-json",
                "--verbose"),
        # ~/.claude holds its settings, login (.credentials.json) and per-project session
        # transcripts (needed to resume or fork a session); ~/.claude.json its config.
        expose=(Exposed("~/.claude", writable=True, create=True),
                Exposed("~/.claude.json", writable=True)),
        env=_CLAUDE_ENV,
        steer=False,  # -p reads no input while it works
        description="Claude Code, print mode, edits accepted without asking",
    ),
    "codex": AgentProfile(
        "codex",
        ("codex", "exec", "--skip-git-repo-check",
         "--dangerously-bypass-approvals-and-sandbox", "{prompt}"),
        resume=("codex", "exec", "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox", "fork", "{session}", "{prompt}"),
        # ~/.codex (or $CODEX_HOME) holds config.toml, auth.json and sessions.
        expose=(Exposed("~/.codex", writable=True, create=True),),
        env=_OPENAI_ENV,
        steer=False,  # exec reads no input while it works
        description="Codex CLI exec; its own sandbox off (forkdeck's is the outer one)",
    ),
    "aider": AgentProfile(
        "aider",
        ("aider", "--yes-always", "--no-auto-commits", "--no-check-update",
         "--no-show-release-notes", "--no-analytics", "--no-pretty", "--no-fancy-input",
         # its history files in the sandbox's private /tmp and no repo-map cache: else
         # .aider.* files would be part of every branch's change
         "--chat-history-file", "/tmp/.aider.chat.history.md",
         "--input-history-file", "/tmp/.aider.input.history", "--map-tokens", "0",
         "--message", "{prompt}"),
        # ~/.aider: caches (model prices, repo map); its dotfile config read-only.
        expose=(Exposed("~/.aider", writable=True, create=True),
                Exposed("~/.aider.conf.yml"), Exposed("~/.aider.model.settings.yml"),
                Exposed("~/.aider.model.metadata.json")),
        env=("OPENAI_*", "ANTHROPIC_*", "AIDER_*", "OPENROUTER_API_KEY", "GEMINI_API_KEY",
             "DEEPSEEK_API_KEY", "GROQ_API_KEY", "OLLAMA_API_BASE", "LITELLM_*"),
        steer=False,  # --message: one message, then it exits
        description="aider, one message, every question answered yes, no git commits",
        cost_patterns=(r"Cost:.*\$([0-9.]+) session",),
    ),
    "gemini": AgentProfile(
        "gemini",
        ("gemini", "--yolo", "--output-format", "json", "-p", "{prompt}"),
        # ~/.gemini holds settings, OAuth credentials and chat checkpoints.
        expose=(Exposed("~/.gemini", writable=True, create=True),),
        env=("GEMINI_*", "GOOGLE_API_KEY", "GOOGLE_CLOUD_*", "GOOGLE_GENAI_*"),
        steer=False,
        description="Gemini CLI, non-interactive, every tool call approved",
    ),
}
CMD_PREFIX = "cmd:"


def _from_settings(base: AgentProfile | None, name: str,
                   cfg: AgentProfileSettings) -> AgentProfile:
    """``[agents.<name>]`` over a built-in (only the keys the file sets) or on its own."""
    if base is None and cfg.command is None:
        raise ProfileError(f"[agents.{name}] needs a command (it is no built-in agent)")
    profile = base or AgentProfile(name, ())
    changes: dict[str, object] = {"name": name}
    if cfg.command is not None:
        changes["command"] = _split(cfg.command, f"agents.{name}.command")
    if cfg.resume is not None:
        changes["resume"] = _split(cfg.resume, f"agents.{name}.resume")
    if cfg.expose is not None:
        changes["expose"] = tuple(Exposed(p, w, create=w and c) for p, w, c in cfg.expose)
    for attr in ("network", "env", "steer", "timeout_s", "cost_budget_usd", "memory", "cpu",
                 "pids", "description"):
        value = getattr(cfg, attr)
        if value is not None:
            changes[attr] = value
    return replace(profile, **changes)


def resolve_profile(spec: str, configured: Mapping[str, AgentProfileSettings] | None = None
                    ) -> AgentProfile:
    """The profile for ``--agent spec``: a configured or built-in name, or ``cmd:COMMAND``."""
    spec = spec.strip()
    if spec.startswith(CMD_PREFIX):
        command = _split(spec[len(CMD_PREFIX):], "cmd")
        return AgentProfile("cmd", command, description="a command line of your own")
    configured = configured or {}
    if spec in configured:
        return _from_settings(BUILTIN.get(spec), spec, configured[spec])
    if spec in BUILTIN:
        return BUILTIN[spec]
    known = sorted({*BUILTIN, *configured})
    raise ProfileError(f"unknown agent {spec!r}: use one of {', '.join(known)}, "
                       f"or cmd:<command line>")


def split_session(spec: str) -> tuple[str, str | None]:
    """``claude@SESSION`` -> (``claude``, ``SESSION``): a fork row that resumes a live
    session into a new one. ``cmd:`` specs are never split (their command may hold ``@``)."""
    spec = spec.strip()
    if spec.startswith(CMD_PREFIX) or "@" not in spec:
        return spec, None
    name, session = spec.rsplit("@", 1)
    if not session or not re.fullmatch(r"[A-Za-z0-9_.:-]{1,128}", session):
        raise ProfileError(f"{spec!r}: the session after @ must be an id like 4f0c-...")
    return name, session


def resolve_row(spec: str, configured: Mapping[str, AgentProfileSettings] | None = None
                ) -> tuple[AgentProfile, str | None]:
    """A fork row's ``agent:`` value without the prefix: the profile and the session to
    fork (refused when the profile cannot resume one)."""
    name, session = split_session(spec)
    profile = resolve_profile(name, configured)
    if session is not None and profile.resume is None:
        raise ProfileError(f"agent {profile.name!r} cannot fork a session (no resume command)")
    return profile, session


def available_profiles(configured: Mapping[str, AgentProfileSettings] | None = None
                       ) -> dict[str, AgentProfile]:
    """Every named profile (built-ins with their overrides, then the file's own)."""
    names: list[str] = sorted({*BUILTIN, *(configured or {})})
    return {name: resolve_profile(name, configured) for name in names}


def check_env_names(names: tuple[str, ...]) -> None:
    """Raise ``ProfileError`` for an ``env`` entry that is no name, glob or assignment."""
    for entry in names:
        name = entry.split("=", 1)[0]
        if not _NAME_RE.match(name):
            raise ProfileError(f"env entry {entry!r} is no variable name")


__all__ = [
    "BASE_ENV",
    "BUILTIN",
    "CMD_PREFIX",
    "AgentProfile",
    "Exposed",
    "ProfileError",
    "available_profiles",
    "check_env_names",
    "resolve_profile",
    "resolve_row",
    "split_session",
]
