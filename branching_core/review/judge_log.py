"""The judge's track record: ``.pydantic-deep/judge-log.jsonl``, agreement, threshold tuning.

Why: "the judge is right 80% of the time" is only worth saying if it was measured on this
user's own forks. Every verdict a person saw and acted on is appended here (goal, a short
report summary, the judge's pick, its confidence, and what the person did), so
``forkdeck status`` can show how often the user agreed with the judge, and
``auto_with_fallback``'s ``confidence_threshold`` can be tuned from it (off by default).

What a line says about the user (``user_action``):

* ``accepted``: the judge's pick was merged by (or with the consent of) the user;
* ``overrode``: the user merged another branch (``chosen`` names it);
* ``cancelled``: the user aborted the fork instead (neither agreement nor disagreement);
* ``auto``: merged with nobody asked (``auto``/``vote`` strategies); kept for the record,
  not counted in the agreement rate, since nobody agreed or disagreed.

Writes: one ``os.write`` of one line on an ``O_APPEND`` descriptor, under ``flock``, so
concurrent writers (the TUI and a headless run) never interleave within a line; a torn last
line left by a crash gets a newline first, so it costs only itself. Reading skips a line it
cannot parse (a torn last line after a crash), so one bad line never hides the rest. A
``.pydantic-deep`` that is a symlink leading outside the workspace is never written through.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from branching_core.errors import ConfigError, InvalidArgumentError
from branching_core.state_dir import STATE_DIR, ensure_gitignore, escape_target

JUDGE_LOG = "judge-log.jsonl"
UserAction = Literal["accepted", "overrode", "cancelled", "auto"]
USER_ACTIONS: tuple[str, ...] = ("accepted", "overrode", "cancelled", "auto")
GOAL_CHARS = 500
MIN_TUNE_SAMPLES = 10
TARGET_AGREEMENT = 0.9


def judge_log_path(path: Path | str) -> Path:
    """The log file for ``path``: a workspace root (or any directory) gets
    ``<path>/.pydantic-deep/judge-log.jsonl``; a file path is taken as the log itself."""
    p = Path(path)
    return p / STATE_DIR / JUDGE_LOG if p.is_dir() else p


def report_summary(report: Any) -> str:
    """One line about a ``BranchDiffReport`` (what the log keeps instead of the diffs)."""
    if report is None:
        return "(no diff report)"
    s = report.summary
    return (
        f"{s.total_paths_touched} path(s): {s.split_paths} split, {s.unique_paths} unique, "
        f"{s.unanimous_change_paths} identical; agreement {s.agreement_score:.2f}"
    )


def _append_line(log: Path, root: Path | None, entry: Mapping[str, Any]) -> None:
    line = (json.dumps(entry, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")
    if root is not None:
        outside = escape_target(root, log)
        if outside is not None:
            raise ConfigError(f"not writing the judge log: {log} leads outside the workspace")
    log.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(log, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # the torn-line check and the write, one writer at a time
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line  # a torn last line (a crash mid-write) stays on its own line
        os.write(fd, line)  # one write: O_APPEND keeps concurrent lines whole
    finally:
        os.close(fd)
    if root is not None:
        ensure_gitignore(root)


def record_judge_decision(
    workspace_root: Path | str,
    outcome: Any = None,
    *,
    user_action: UserAction | str,
    chosen: str | None = None,
    goal: str | None = None,
    verdict: Any = None,
    confidence: float | None = None,
    report: Any = None,
    domain: str | None = None,
    fork_id: str | None = None,
) -> dict[str, Any]:
    """Append one decision to ``<workspace_root>/.pydantic-deep/judge-log.jsonl``.

    ``outcome`` is the ``ResolveOutcome`` the user saw (its goal, verdict, confidence,
    report and domain are used unless given explicitly); ``chosen`` is the label the user
    merged (defaults to the judge's pick for ``accepted``/``auto``). Returns the entry.
    Raises ``ValueError`` for an unknown ``user_action`` or an ``overrode`` without
    ``chosen`` (nothing is written then), ``ConfigError`` when the state directory leads
    outside the workspace.
    """
    if user_action not in USER_ACTIONS:
        raise InvalidArgumentError(
            f"unknown user_action {user_action!r}: use {', '.join(USER_ACTIONS)}"
        )
    if verdict is None and outcome is not None:
        verdict = outcome.verdict
    label = getattr(outcome, "winner_label", None) or getattr(verdict, "winner", None)
    if user_action == "overrode" and not chosen:
        raise InvalidArgumentError(
            "user_action 'overrode' needs chosen=<the label the user merged>"
        )
    if chosen is None and user_action in ("accepted", "auto"):
        chosen = label
    if confidence is None and outcome is not None:
        confidence = outcome.confidence
    goal = goal if goal is not None else getattr(outcome, "goal", None)
    entry: dict[str, Any] = {
        "ts": time.time(),
        "fork_id": fork_id or getattr(getattr(outcome, "report", None), "fork_id", None),
        "goal": (goal or "")[:GOAL_CHARS],
        "domain": domain or getattr(outcome, "domain", None),
        "report": report_summary(
            report if report is not None else getattr(outcome, "report", None)
        ),
        "verdict": label,
        "judge_confidence": getattr(verdict, "confidence", None),
        "confidence": confidence,
        "user_action": user_action,
        "chosen": chosen,
    }
    # "accepted" is only agreement when the user merged the judge's pick
    if user_action == "accepted" and chosen is not None and label is not None and chosen != label:
        entry["user_action"] = "overrode"
    root = Path(workspace_root)
    _append_line(judge_log_path(root), root, entry)
    return entry


def read_judge_log(path: Path | str) -> list[dict[str, Any]]:
    """Every readable entry (a line that does not parse is skipped)."""
    log = judge_log_path(path)
    try:
        data = log.read_bytes()
    except FileNotFoundError:
        return []
    entries = []
    for raw in data.splitlines():
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("user_action") in USER_ACTIONS:
            entries.append(entry)
    return entries


@dataclass(frozen=True)
class JudgeAgreement:
    """How often the user went with the judge: ``rate = accepted / (accepted + overridden)``
    (``None`` before the first such decision); cancelled and auto merges are counted apart."""

    accepted: int = 0
    overridden: int = 0
    cancelled: int = 0
    auto: int = 0

    @property
    def decided(self) -> int:
        return self.accepted + self.overridden

    @property
    def rate(self) -> float | None:
        return self.accepted / self.decided if self.decided else None

    def line(self) -> str:
        """``judge agreement: 80% (8 of 10 decisions; 1 cancelled)`` for a status view."""
        if self.rate is None:
            return "judge agreement: no decisions yet"
        extra = [
            f"{n} {what}" for n, what in ((self.cancelled, "cancelled"), (self.auto, "auto")) if n
        ]
        tail = "".join(f"; {e}" for e in extra)
        return (
            f"judge agreement: {self.rate:.0%} ({self.accepted} of {self.decided} "
            f"decision{'s' if self.decided != 1 else ''}{tail})"
        )


def _tally(entries: Iterable[Mapping[str, Any]]) -> JudgeAgreement:
    counts = {a: 0 for a in USER_ACTIONS}
    for e in entries:
        action = str(e["user_action"])
        if action in ("accepted", "overrode") and not e.get("verdict"):
            continue  # the judge named no branch: nothing to agree or disagree with
        counts[action] += 1
    return JudgeAgreement(
        counts["accepted"], counts["overrode"], counts["cancelled"], counts["auto"]
    )


def judge_agreement(path: Path | str) -> JudgeAgreement:
    """The agreement of the log at ``path`` (a workspace root or the log file)."""
    return _tally(read_judge_log(path))


def tune_confidence_threshold(
    path: Path | str,
    default: float,
    *,
    target: float = TARGET_AGREEMENT,
    min_samples: int = MIN_TUNE_SAMPLES,
) -> float:
    """The lowest threshold at which the logged decisions would have agreed with the user
    at least ``target`` of the time, given at least ``min_samples`` decisions at or above it.

    Only ``accepted``/``overrode`` entries with a known combined ``confidence`` count. With
    too little history, or when no threshold reaches ``target``, ``default`` is returned
    (never lower than the evidence supports, never a guess). The result is clamped to 0.5..0.99
    so a lucky streak cannot turn the confirmation step off.
    """
    points = sorted(
        (float(e["confidence"]), e["user_action"] == "accepted")
        for e in read_judge_log(path)
        if e["user_action"] in ("accepted", "overrode")
        and isinstance(e.get("confidence"), int | float)
    )
    if len(points) < min_samples:
        return default
    for i, (conf, _) in enumerate(points):
        above = points[i:]
        if len(above) < min_samples:
            break
        agreed = sum(1 for _, ok in above if ok) / len(above)
        if agreed >= target:
            return min(max(round(conf, 3), 0.5), 0.99)
    return default


__all__ = [
    "JUDGE_LOG",
    "USER_ACTIONS",
    "JudgeAgreement",
    "UserAction",
    "judge_agreement",
    "judge_log_path",
    "read_judge_log",
    "record_judge_decision",
    "report_summary",
    "tune_confidence_threshold",
]
