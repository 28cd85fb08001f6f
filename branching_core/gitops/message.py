"""The landing commit's message: the user's, else a summary of the branch's steer, with
trailers that say where the change came from (fork, branch, model, tests)."""

from __future__ import annotations

from collections.abc import Mapping

SUBJECT_MAX = 72


def summary_line(steer: str | None, fallback: str = "Land a forkdeck branch") -> str:
    """A commit subject from a steer: its first non-empty line, capitalised, no trailing
    period; else ``fallback``. At most 72 characters either way."""
    for line in (steer or "").splitlines():
        line = " ".join(line.split()).rstrip(".")
        if line:
            return _fit(line[0].upper() + line[1:])
    return _fit(fallback)


def _fit(line: str) -> str:
    return line if len(line) <= SUBJECT_MAX else line[: SUBJECT_MAX - 1].rstrip() + "…"


def landing_message(
    message: str | None,
    *,
    steer: str | None = None,
    trailers: Mapping[str, str | None] | None = None,
    fallback: str = "Land a forkdeck branch",
) -> str:
    """``message`` (or the steer's summary line) followed by ``Forkdeck-*`` trailers;
    a trailer whose value is ``None`` or empty is left out."""
    body = (message or "").strip() or summary_line(steer, fallback)
    lines = [
        f"Forkdeck-{key}: {' '.join(str(value).split())}"
        for key, value in (trailers or {}).items()
        if value
    ]
    return body + ("\n\n" + "\n".join(lines) if lines else "") + "\n"


__all__ = ["landing_message", "summary_line"]
