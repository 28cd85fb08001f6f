"""``agents -p PROMPT --agent claude --agent 'cmd:...'``: race external CLI agents.

Each agent runs in its own copy-on-write branch sandbox (the branch at the workspace's
own path, on a pseudo-terminal); then the test command runs in each branch and the pick
lands one (see ``branching_core.external``). Output: one line per branch, redrawn live on
a terminal (stderr), else each agent line prefixed with its label; ``--json`` prints the
outcome per branch.
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from typing import Any, TextIO

from branching_core.cli._common import UsageError, emit, limits_from, open_workspace


class _Board:
    """One line per branch on a terminal: state, elapsed, cost, the agent's last line."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.runs: dict[str, Any] = {}
        self.last: dict[str, str] = {}
        self._drawn = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, daemon=True)

    def line(self, label: str, text: str) -> None:
        from branching_core.external.runner import strip_ansi

        plain = strip_ansi(text).strip()
        if plain:
            with self._lock:
                self.last[label] = plain

    def event(self, _kind: str, run: Any) -> None:
        with self._lock:
            self.runs[run.label] = run

    def __enter__(self) -> _Board:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop redrawing (before the manual pick's table and question); idempotent."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(1.0)
        self.draw()

    def _tick(self) -> None:
        while not self._stop.wait(0.2):
            self.draw()

    def draw(self) -> None:
        with self._lock:
            rows = []
            for label, run in self.runs.items():
                cost = f"${run.cost_usd:.4f}" if run.cost_usd is not None else ""
                rows.append(f"  {label:<14} {run.status.state:<11} {run.duration:6.1f}s "
                            f"{cost:<9} {self.last.get(label, '')}")
            out = "\x1b[F" * self._drawn if self._drawn else ""
            out += "".join(f"\x1b[2K{row[:160]}\n" for row in rows)
            self._drawn = len(rows)
        self.stream.write(out)
        self.stream.flush()


def _prefixed(stream: TextIO) -> Any:
    lock = threading.Lock()

    def line(label: str, text: str) -> None:
        with lock:
            stream.write(f"[{label}] {text}\n")
            stream.flush()

    return line


def _ask(rows: list[Any]) -> str | None:
    """The manual pick: a table on stderr, a label (or nothing) read from stdin."""
    err = sys.stderr
    err.write(f"  {'branch':<14} {'status':<9} {'exit':>4} {'tests':<7} {'lines':>6} "
              f"{'time':>7}  changed\n")
    for r in rows:
        exit_code = "" if r.exit_code is None else str(r.exit_code)
        err.write(f"  {r.label:<14} {r.status:<9} {exit_code:>4} {r.tests:<7} "
                  f"{r.diff_lines:>6} {r.duration_s:6.1f}s  {', '.join(r.changed[:4])}"
                  f"{' ...' if len(r.changed) > 4 else ''}\n")
    labels = [r.label for r in rows]
    while True:
        err.write(f"land which branch? [{'/'.join(labels)}, empty: none] ")
        err.flush()
        try:
            answer = input().strip()
        except EOFError:
            return None
        if not answer:
            return None
        if answer in labels:
            return answer
        err.write(f"no branch {answer!r}\n")


def _text(outcome: Any) -> str:
    lines = []
    for b in outcome.branches:
        tests = "" if b.tests is None else ("tests passed" if b.tests["ok"] else "tests failed")
        cost = f" ${b.cost_usd:.4f}" if b.cost_usd is not None else ""
        code = "" if b.exit_code is None else f" exit {b.exit_code}"
        why = f" ({b.error})" if b.error else ""
        lines.append(f"{b.label}: {b.status}{code} {b.duration_s:.1f}s{cost} {tests} "
                     f"{len(b.changed)} changed{why}".rstrip())
    verdict = (f"landed {outcome.winner}" if outcome.winner else "nothing landed")
    lines.append(f"{verdict}" + (f": {outcome.note}" if outcome.note else ""))
    return "\n".join(lines)


def _profiles(args: argparse.Namespace, ws_path: Any) -> tuple[list[Any], Any]:
    from branching_core.config import load_settings
    from branching_core.external.profiles import ProfileError, resolve_profile

    settings = load_settings(ws_path).settings
    if not args.agent:
        raise UsageError("agents: name at least one --agent (claude, codex, aider, gemini, "
                         "cmd:<command line>, or an [agents.<name>] profile)")
    try:
        profiles = [resolve_profile(spec, settings.agents) for spec in args.agent]
    except ProfileError as exc:
        raise UsageError(f"agents: {exc}") from None
    if args.fork_session:
        missing = [p.name for p in profiles if p.resume is None]
        if missing:
            raise UsageError(f"agents: --fork-session: {', '.join(sorted(set(missing)))} cannot "
                             "resume a session (no resume command in its profile)")
    return profiles, settings


def cmd_agents(args: argparse.Namespace) -> int:
    from branching_core.external.race import AgentRace
    from branching_core.review.detect_tests import choose_test_command

    if not args.prompt or not args.prompt.strip():
        raise UsageError("agents: -p PROMPT is required")
    if args.n < 1:
        raise UsageError("agents: -n must be at least 1")
    if args.timeout is not None and args.timeout <= 0:
        raise UsageError("agents: --timeout must be greater than 0")
    ws = open_workspace(args)
    profiles, settings = _profiles(args, ws.path)
    if args.no_test:
        test = None
    else:
        detected = choose_test_command(args.test or settings.test_command, ws.path)
        test = detected.command if detected is not None else None
    if args.pick == "tests" and test is None:
        sys.stderr.write("agents: no test command (set --test or [review] test_command): "
                         "--pick tests lands the smallest change of an agent that exited 0\n")
    live = not args.json and sys.stderr.isatty()
    board = _Board(sys.stderr) if live else None
    on_line = board.line if board is not None else (None if args.json
                                                    else _prefixed(sys.stderr))
    def chooser(rows: list[Any]) -> str | None:
        if board is not None:
            board.stop()  # the table and the question must not be redrawn over
        return _ask(rows)

    race = AgentRace(
        ws, profiles, args.prompt, n=args.n, pick=args.pick, test_command=test,
        test_timeout=settings.test_timeout_s, timeout=args.timeout,
        cost_budget_usd=args.cost_budget, session=args.fork_session, on_line=on_line,
        on_event=board.event if board is not None else None, chooser=chooser,
        judge_model=args.judge_model or settings.model, limits=limits_from(args),
    )
    started = time.monotonic()
    try:
        if board is not None:
            with board:
                outcome = race.run()
        else:
            outcome = race.run()
    except KeyboardInterrupt:
        race.cancel()
        raise
    data = outcome.to_json()
    data["duration_s"] = round(time.monotonic() - started, 3)
    emit(args, data, _text(outcome))
    return 0 if outcome.winner is not None else 1


def add_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    p = sub.add_parser(
        "agents", parents=[common], help="race external CLI agents, one per branch",
        description="Run external agents (Claude Code, Codex, aider, Gemini CLI, any command) "
                    "each in its own copy-on-write branch sandbox; test each branch; land "
                    "the pick.")
    p.add_argument("-p", "--prompt", required=True, help="the task every agent gets")
    p.add_argument("--agent", action="append", metavar="PROFILE",
                   help="claude, codex, aider, gemini, an [agents.<name>] profile, or "
                        "'cmd:COMMAND {prompt}' (repeatable)")
    p.add_argument("-n", type=int, default=1, help="branches per agent (default 1)")
    p.add_argument("--test", metavar="CMD", help="test command (default: [review] "
                   "test_command, else detected from the project)")
    p.add_argument("--no-test", action="store_true", help="run no tests")
    p.add_argument("--pick", choices=["tests", "judge", "manual", "first"], default="tests",
                   help="tests: smallest passing diff (default); judge; manual: ask; "
                        "first: the first agent to exit 0, the rest killed")
    p.add_argument("--timeout", type=float, metavar="S",
                   help="wall-clock budget per branch, in seconds")
    p.add_argument("--cost-budget", type=float, metavar="USD",
                   help="stop a branch whose agent reports more than this cost")
    p.add_argument("--fork-session", metavar="ID",
                   help="resume this saved agent session into a new one in every branch")
    p.add_argument("--judge-model", metavar="MODEL", help="model for --pick judge")
    p.set_defaults(handler=cmd_agents)


__all__ = ["cmd_agents"]
