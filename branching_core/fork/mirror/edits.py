"""Edits a user makes in a branch's mirror (an IDE open on ``branches/<label>/``) flow
back into that branch's copy-on-write view.

The watcher reports writes under ``branches/``; :func:`apply_user_edits` looks at each
path, and only when the entry is not what the mirror itself last left there
(:class:`~branching_core.fork.mirror.stamps.StampBook`) is it the user's:

* the branch did not change the path since the last sync: the user's version (or its
  deletion) is written into the branch's view (temporary file + rename, so a tool never
  reads a torn file), and reported as a :class:`UserEdit`;
* the branch changed it too: a **conflict**. The branch keeps its version (its view is
  not touched), the user's version is kept under ``<fork dir>/conflicts/<dir>/<rel>``, the
  mirror shows the branch's version again, and an :class:`EditConflict` is reported;
* a symlink, a path through a symlink (in the mirror or in the view), or anything that
  is not a regular file is refused (:class:`EditRefused`): nothing is applied. The write
  into the view itself never follows a link (``workspace.beneath``), and a branch's link
  that leaves the branch is mirrored dead (``links``), so the IDE cannot save through it.

The batch's :meth:`EditBatch.note` is what the branch's model is told at its next
request (once per batch).
"""

from __future__ import annotations

import difflib
import os
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from branching_core.errors import UnsafeChangeError
from branching_core.fork.mirror.stamps import Stamp, digest, lstat, stash
from branching_core.fork.mirror.sync import TMP_MARK, MirroredBranch, MirrorTree, relevant
from branching_core.workspace import beneath
from branching_core.workspace.guard import PRIVILEGE_BITS, linked_steps
from branching_core.workspace.paths import path_problem

EDITOR_DIRS = frozenset({".idea"})
"""Top-level directories an IDE makes on its own when it opens a folder: never applied."""
_NOISE_SUFFIXES = ("~", ".swp", ".swo", ".swx", "___jb_tmp___", "___jb_old___", ".crswap")


def editor_noise(rel: str) -> bool:
    """An editor's own scratch file (swap, backup, lock, atomic-save temporary) or project
    metadata: not the user's edit, so never applied to the branch nor reported."""
    if rel.split("/", 1)[0] in EDITOR_DIRS:
        return True
    name = rel.rsplit("/", 1)[-1]
    return (
        name.endswith(_NOISE_SUFFIXES)
        or name.startswith(".#")
        or (name.startswith("#") and name.endswith("#"))
        or name in ("4913", ".DS_Store")
    )


DIFF_LINES = 40
"""At most this many diff lines per file go into the model's note."""
_MAX_TEXT = 256 * 1024


@dataclass(frozen=True)
class UserEdit:
    """One path the user changed in the mirror that is now in the branch's view."""

    path: str
    operation: Literal["created", "modified", "deleted"]
    added: int = 0
    removed: int = 0
    diff: str = ""
    """A unified diff (capped at :data:`DIFF_LINES`), empty for binary files."""

    def summary(self) -> str:
        if self.operation == "deleted":
            return f"{self.path} (deleted)"
        return f"{self.path} ({self.operation}, +{self.added} -{self.removed})"


@dataclass(frozen=True)
class EditConflict:
    """A path both the user (in the mirror) and the branch (in its view) changed."""

    path: str
    kept_as: Path | None
    """Where the user's version is kept (None: the user had deleted the file)."""


@dataclass(frozen=True)
class EditRefused:
    path: str
    reason: str


@dataclass
class EditBatch:
    """What one watcher batch brought in for one branch."""

    label: str
    dirname: str
    edits: list[UserEdit] = field(default_factory=list)
    conflicts: list[EditConflict] = field(default_factory=list)
    refused: list[EditRefused] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.edits or self.conflicts or self.refused)

    def note(self) -> str:
        """The message for the branch's model (empty when there is nothing to tell it)."""
        if not self.edits and not self.conflicts:
            return ""
        lines: list[str] = []
        if self.edits:
            lines.append(
                "[the user edited files of this branch in their editor; "
                "your workspace has their version now]"
            )
            for edit in self.edits:
                lines.append(f"- {edit.summary()}")
                if edit.diff:
                    lines.extend(["```diff", edit.diff.rstrip("\n"), "```"])
        for conflict in self.conflicts:
            lines.append(
                f"- {conflict.path}: the user edited it too, but you had changed it since; "
                "your version was kept (the user sees the conflict)"
            )
        return "\n".join(lines)


def _unsafe(root: Path, rel: str, *, what: str) -> str | None:
    """Why writing ``root/rel`` could leave ``root``, else None: the landing rule's own
    checks (``workspace.paths.path_problem``: relative, no ``..``/NUL, not forkdeck's
    state; ``workspace.guard.linked_steps``: no symlink on the way), as every landing."""
    reason = path_problem(rel)
    if reason is not None:
        return f"{rel}: not a path inside the {what} ({reason})"
    linked = linked_steps([(rel, "f")], root)
    if linked:
        return f"{linked[0][1]} (in the {what})"
    return None


def _text(path: Path) -> str | None:
    """The file's text (None for absent, binary or huge files)."""
    st = lstat(path)
    if st is None or not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_TEXT:
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def describe(rel: str, old: Path, new: Path) -> UserEdit:
    """``old`` (the view before) against ``new`` (the user's version): a capped diff."""
    old_exists, new_exists = lstat(old) is not None, lstat(new) is not None
    if not new_exists:
        return UserEdit(rel, "deleted")
    operation: Literal["created", "modified"] = "modified" if old_exists else "created"
    a = _text(old) if old_exists else ""
    b = _text(new)
    if a is None or b is None:
        return UserEdit(rel, operation)
    diff = list(
        difflib.unified_diff(
            a.splitlines(keepends=True), b.splitlines(keepends=True), f"a/{rel}", f"b/{rel}"
        )
    )
    added = sum(1 for ln in diff[2:] if ln.startswith("+"))
    removed = sum(1 for ln in diff[2:] if ln.startswith("-"))
    body = diff[2:]
    text = "".join(ln if ln.endswith("\n") else ln + "\n" for ln in body[:DIFF_LINES])
    if len(body) > DIFF_LINES:
        text += f"... ({len(body) - DIFF_LINES} more diff lines)\n"
    return UserEdit(rel, operation, added, removed, text)


def _write_view(source: Path, view_root: Path, rel: str) -> None:
    """The user's file into the branch's view at ``rel``, by temporary file + rename,
    through ``workspace.beneath``: no symlink below the view is followed (one the branch
    made a moment after ``_unsafe`` looked included), and the file lands without
    setuid/setgid."""
    fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeChangeError(f"{rel}: only regular files are applied", [rel])
        beneath.write_file(
            view_root,
            rel,
            source_fd=fd,
            mode=stat.S_IMODE(st.st_mode) & ~PRIVILEGE_BITS,
            tmp_prefix=f"{TMP_MARK}{threading.get_ident()}-",
        )
    finally:
        os.close(fd)


def _expand(tree: MirrorTree, b: MirroredBranch, rels: set[str]) -> list[str]:
    """Files behind the reported paths: a directory the user created (its files may have
    landed before it was watched) or removed (every file the mirror had under it)."""
    root = tree.branch_root(b.dirname)
    out: set[str] = set()
    for rel in rels:
        st = lstat(root / rel)
        if st is not None and stat.S_ISDIR(st.st_mode):
            for dirpath, dirnames, filenames in os.walk(root / rel):
                base = Path(dirpath).relative_to(root).as_posix()
                links = [d for d in dirnames if (Path(dirpath) / d).is_symlink()]
                out.update(f"{base}/{name}" for name in filenames + links)
        elif st is None:
            out.update(tree.stamps.paths_under(b.dirname, rel))
            out.add(rel)
        else:
            out.add(rel)
    return sorted(r for r in out if relevant(r) and not editor_noise(r))


def apply_user_edits(
    tree: MirrorTree, b: MirroredBranch, rels: set[str], refused_seen: set[tuple[str, str]]
) -> EditBatch:
    """Apply the user's changes among ``rels`` (paths under ``branches/<dir>/``) to the
    branch's view. The caller holds the branch (it is open) and nothing else;
    ``refused_seen`` remembers refusals already reported (one notice per version)."""
    batch = EditBatch(b.label, b.dirname)
    root = tree.branch_root(b.dirname)
    with tree.lock:
        applied: list[str] = []
        for rel in _expand(tree, b, rels):
            if not tree.stamps.user_changed(b.dirname, rel):
                continue
            entry, view = root / rel, b.view / rel
            mine = digest(entry)
            reason = _unsafe(root, rel, what="mirror") or _unsafe(b.view, rel, what="branch")
            est, vst = lstat(entry), lstat(view)
            if reason is None and est is not None and not stat.S_ISREG(est.st_mode):
                reason = f"{rel}: only regular files are applied (this is a symlink or special)"
            if reason is None and vst is not None and not stat.S_ISREG(vst.st_mode):
                reason = f"{rel}: the branch has a directory or symlink there; not replaced"
            if reason is not None:
                if (rel, mine) not in refused_seen:
                    refused_seen.add((rel, mine))
                    batch.refused.append(EditRefused(rel, reason))
                continue
            now = digest(view)
            base = tree.stamps.base_view(b.dirname, rel)
            if now == mine:  # the branch already holds exactly this
                tree.stamps.record(b.dirname, rel, Stamp(mine, mine))
                applied.append(rel)
                continue
            if now != base:  # the branch changed it too since the last sync
                kept = stash(entry, tree.conflicts_dir, b.dirname, rel)
                batch.conflicts.append(EditConflict(rel, kept))
                tree.stamps.forget(b.dirname, rel, mirror=mine, view=base)
                applied.append(rel)  # the sync mirrors the branch's version again
                continue
            edit = describe(rel, view, entry)
            try:
                if est is None:
                    if vst is not None:
                        beneath.remove(b.view, rel)
                else:
                    _write_view(entry, b.view, rel)
            except UnsafeChangeError as exc:
                batch.refused.append(EditRefused(rel, str(exc)))
                continue
            except OSError as exc:
                batch.refused.append(EditRefused(rel, f"{rel}: not applied ({exc})"))
                continue
            tree.stamps.forget(b.dirname, rel, mirror=mine, view=mine)
            batch.edits.append(edit)
            applied.append(rel)
        if applied:
            tree.sync(b, applied)
    return batch


def take_conflicts(tree: MirrorTree, labels: dict[str, str]) -> dict[str, list[EditConflict]]:
    """Conflicts the mirror's syncs found (branch dirname -> conflicts), emptied."""
    with tree.lock:
        found, tree.pending_conflicts = tree.pending_conflicts, []
    out: dict[str, list[EditConflict]] = {}
    for dirname, rel, kept in found:
        if dirname in labels:
            out.setdefault(dirname, []).append(EditConflict(rel, kept))
    return out


__all__ = [
    "EditBatch",
    "EditConflict",
    "EditRefused",
    "UserEdit",
    "apply_user_edits",
    "describe",
    "editor_noise",
    "take_conflicts",
]
