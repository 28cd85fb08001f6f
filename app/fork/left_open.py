"""The forks a crashed session left open, read from their manifests with the standard
library alone.

Why not ``ForkStore``: importing anything under ``branching_core.fork`` imports the
coordinator and pydantic-ai, which the start-up worker is importing at the same moment in
another thread (two threads importing one package half-way is an ImportError), and which
is the slow part the recovery dialog must not wait for (issue 24.13). The manifest's
location and fields are ``ForkStore``'s (``.pydantic-deep/forks/<id>/manifest.json``):
this reads the same files by the same rules (``list_open``: not resolved, not an intent of
a fork still being created; top-level forks only, as ``ChatSession.open_forks``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from branching_core import STATE_DIR


def forks_left_open(root: Path) -> list[dict[str, Any]]:
    """Top-level open forks under ``root``, oldest first (unreadable manifests skipped)."""
    forks_dir = Path(root) / STATE_DIR / "forks"
    if not forks_dir.is_dir():
        return []
    found: list[dict[str, Any]] = []
    for entry in forks_dir.iterdir():
        try:
            manifest = json.loads((entry / "manifest.json").read_bytes())
        except (OSError, ValueError):
            continue
        if (
            isinstance(manifest, dict)
            and not manifest.get("creating")
            and not manifest.get("resolved")
            and int(manifest.get("depth", 1)) == 1
        ):
            found.append(manifest)
    return sorted(found, key=lambda m: float(m.get("created_at", 0.0) or 0.0))


__all__ = ["forks_left_open"]
