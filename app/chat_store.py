"""The chat's history on disk, so ``forkdeck --resume`` continues where the last run ended.

Why a file per workspace under ``.pydantic-deep/sessions/``: the conversation belongs to
the workspace it changed, next to ``config.toml``; the directory carries its own
``.gitignore`` (``*``) so a transcript, which may quote secrets from the files, is never
committed by accident, while ``config.toml`` stays committable. The history is written
with pydantic-ai's own ``ModelMessagesTypeAdapter`` (what ``--resume`` hands back to the
agent is exactly what it produced), atomically (a crash mid-write keeps the old file).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

SESSIONS_DIR = Path(".pydantic-deep") / "sessions"
LATEST = "latest.json"
GITIGNORE = "# forkdeck chat transcripts (forkdeck --resume): never commit them\n*\n"


def sessions_dir(root: Path) -> Path:
    return root / SESSIONS_DIR


def save_history(root: Path, history: list[Any]) -> Path:
    """Write ``history`` (pydantic-ai messages) as the workspace's latest chat."""
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    folder = sessions_dir(root)
    folder.mkdir(parents=True, exist_ok=True)
    ignore = folder / ".gitignore"
    if not ignore.exists():
        ignore.write_text(GITIGNORE, encoding="utf-8")
    data = ModelMessagesTypeAdapter.dump_json(history, indent=1)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".latest-", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, folder / LATEST)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return folder / LATEST


def load_history(root: Path) -> list[Any]:
    """The latest saved chat ([] when there is none); ValueError (one line) if unreadable."""
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    path = sessions_dir(root) / LATEST
    if not path.exists():
        return []
    try:
        return list(ModelMessagesTypeAdapter.validate_json(path.read_bytes()))
    except Exception as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ValueError(f"{path}: cannot read the saved chat ({first})") from None
