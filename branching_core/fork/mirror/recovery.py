"""Mirrors left behind by a killed process: rebuilt when their fork is open, else removed.

A process killed mid-fork (SIGKILL, OOM, a closed laptop) cannot clean up, so its
``parent/`` and ``branches/`` stay under ``.pydantic-deep/forks/<fork_id>/``. At the next
start :func:`recover_mirrors` looks at every fork directory holding mirror artefacts:

* mirrored by a live process (its ``mirror.lock`` is held): left alone;
* the fork is still open and its durable workspace branches reopen: rebuilt from the
  branches (by the recovered coordinator's hook, which then keeps watching, or once);
* resolved with ``keep_artifacts``: kept, that is what the user asked for;
* anything else (resolved, aborted, manifest or branches lost): removed.

The fork store's own files (manifest, history, checkpoints) are never touched.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from branching_core.fork.mirror.materializer import (
    LOCK_FILE,
    MIRROR_FILE,
    ForkMaterializer,
    _try_lock,
    remove_mirror,
)
from branching_core.fork.store import ForkStore

log = logging.getLogger(__name__)


@dataclass
class MirrorRecovery:
    """What :func:`recover_mirrors` did, fork id by fork id."""

    rebuilt: list[str] = field(default_factory=list)
    cleaned: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    live: list[str] = field(default_factory=list)
    materializers: dict[str, ForkMaterializer] = field(default_factory=dict)
    """Mirrors that are watching now (those of the coordinators passed in)."""


def _has_mirror(fork_dir: Path) -> bool:
    return any((fork_dir / name).exists() for name in ("parent", "branches", MIRROR_FILE))


def _read_info(fork_dir: Path) -> dict[str, Any]:
    try:
        data = json.loads((fork_dir / MIRROR_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def recover_mirrors(
    workspace: Any,
    coordinators: Iterable[Any] = (),
    *,
    keep_artifacts: bool | None = None,
) -> MirrorRecovery:
    """Rebuild or clean every orphaned mirror under ``workspace`` (see the module docstring).

    ``workspace`` is a ``Workspace`` or a path. ``coordinators`` are recovered
    coordinators (``ForkCoordinator.recover``): those with a mirror hook get a live,
    watching mirror; other open forks are rebuilt once (their branches reopened).
    A resolved fork's mirror is kept when it was made with ``keep_artifacts`` or when
    ``keep_artifacts`` is true here (a setting turned off later never deletes what an
    earlier run was asked to keep).
    """
    root = Path(getattr(workspace, "path", workspace))
    store = ForkStore(root)
    report = MirrorRecovery()
    handled: set[str] = set()
    for coord in coordinators:
        hook = getattr(coord, "mirror_hook", None)
        if hook is None or coord.fork_id is None or coord.is_resolved:
            continue
        mat = hook.resume(wait=True)
        if mat is not None:
            handled.add(coord.fork_id)
            report.rebuilt.append(coord.fork_id)
            report.materializers[coord.fork_id] = mat
    if not store.forks_dir.is_dir():
        return report
    for fork_dir in sorted(store.forks_dir.iterdir()):
        fork_id = fork_dir.name
        if fork_id in handled or not fork_dir.is_dir() or not _has_mirror(fork_dir):
            continue
        fd = _try_lock(fork_dir / LOCK_FILE)
        if fd is None:
            report.live.append(fork_id)
            continue
        try:
            _recover_one(workspace, store, fork_dir, keep_artifacts, report)
        finally:
            os.close(fd)
    return report


def _recover_one(
    workspace: Any,
    store: ForkStore,
    fork_dir: Path,
    keep_artifacts: bool | None,
    report: MirrorRecovery,
) -> None:
    fork_id = fork_dir.name
    manifest = store.read_manifest(fork_id)
    info = _read_info(fork_dir)
    keep = bool(info.get("keep_artifacts")) or bool(keep_artifacts)
    if manifest is not None and manifest.get("resolved") and keep:
        report.kept.append(fork_id)
        return
    if manifest is not None and not manifest.get("resolved"):
        try:
            _rebuild(workspace, manifest, keep)
        except Exception as exc:  # branches lost, store moved: the mirror cannot be trusted
            log.warning("cannot rebuild the mirror of fork %s: %s", fork_id, exc)
        else:
            report.rebuilt.append(fork_id)
            return
    remove_mirror(fork_dir)
    report.cleaned.append(fork_id)


def _rebuild(workspace: Any, manifest: dict[str, Any], keep: bool) -> None:
    """One full reconcile of an open fork's mirror from its reopened durable branches."""
    from branching_core.workspace import Workspace

    ws = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
    parent_ws_id = manifest.get("parent_workspace_branch_id")
    parent_root = ws.open_branch(parent_ws_id).path if parent_ws_id else ws.path
    mat = ForkMaterializer(
        ws.path, manifest["fork_id"], parent_root=parent_root, keep_artifacts=keep
    )
    for data in manifest.get("branches", []):
        if data.get("resolution") is None and data.get("workspace_branch_id"):
            mat.add_branch(data["label"], ws.open_branch(data["workspace_branch_id"]))
    mat.rebuild()
    mat._write_info("rebuilt")


__all__ = ["MirrorRecovery", "recover_mirrors"]
