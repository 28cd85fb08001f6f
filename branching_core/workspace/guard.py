"""The one landing rule: what any change must be before it may land, checked once.

Every way a change reaches a parent goes through :func:`check_landing` before its commit
point: ``Branch.commit`` (a pick, a pattern's winner, a sub-agent, the CLI's ``run``) and
``land.land_files`` (a combine, a stale winner's or sub-agent's paths, a Ray node's delta,
an IDE save relayed through the mirror lands in a branch view with the same
``beneath`` operations). It refuses the change as a whole with ``UnsafeChangeError``
(nothing applied) when

* a path is not a plain relative path inside the root (``paths.path_problem``: absolute,
  ``..``, NUL, empty components, too long, forkdeck's own state);
* a path would be reached through a symlink inside the parent: one the parent holds, or
  one the same change puts earlier (``a -> /etc`` then ``a/passwd``);
* an entry is a device, a FIFO or a socket (decided: refused, never landed as nothing,
  so a change is never silently different from what the branch holds; the message names
  the path so the branch can remove it);

then strips what a branch must not hand the user: setuid and setgid bits and the
``security.capability`` xattr of every file it produced, and setuid of directories
(decided: a directory keeps setgid, which only makes new entries inherit the directory's
group, a group the branch's user already has: no privilege, and shared project trees
rely on it), unless the caller opts in with ``keep_privileges=True``; and finally applies the
one conflict rule (``precheck.refuse_unapplicable``: changed in the parent since the
change began, or structurally impossible, or not writable).

Sources are the branch's own files in our store or staging; stripping them in place is
done before the commit point, so a replay after a crash publishes stripped files too.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

from branching_core.errors import UnsafeChangeError
from branching_core.workspace.changes import Op, RemovalRecord, ordered
from branching_core.workspace.fsutil import lstat_or_none
from branching_core.workspace.paths import path_problem
from branching_core.workspace.precheck import refuse_unapplicable

PRIVILEGE_BITS = stat.S_ISUID | stat.S_ISGID
CAPABILITY_XATTR = "security.capability"
_SHOWN = 5


def refuse(problems: list[tuple[str, str]], what: str) -> UnsafeChangeError:
    """One error for every problem found (the first few spelled out)."""
    shown = "; ".join(reason for _, reason in problems[:_SHOWN])
    more = f" (and {len(problems) - _SHOWN} more)" if len(problems) > _SHOWN else ""
    return UnsafeChangeError(
        f"refused to land {what}: {shown}{more}; nothing was applied",
        [path for path, _ in problems],
    )


def special_kind(mode: int) -> str | None:
    """'a device', 'a FIFO', 'a socket' for what never lands, else None."""
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return None


def check_landing(
    ops: list[Op],
    parent_root: Path,
    *,
    since_ns: int | None,
    parent_name: str,
    since: str,
    cannot: str,
    what: str,
    root_names: frozenset[str] | None = None,
    keep_privileges: bool = False,
    landings: RemovalRecord | None = None,
) -> list[Op]:
    """The landing rule for ``ops`` into ``parent_root`` (module doc); returns the ops to
    journal (directory modes stripped). ``since_ns`` None: the caller decided conflicts
    against its own record (a Ray snapshot's manifest); the structural and permission
    checks still run. ``root_names``, ``landings``: what the parent side knows of paths a
    branch cannot say it found there (``changes.find_conflicts``)."""
    problems = [(op.path, reason) for op in ops if (reason := path_problem(op.path))]
    if problems:
        raise refuse(problems, what)
    problems, stats = _linked_or_special(ops, parent_root)
    if problems:
        raise refuse(problems, what)
    if not keep_privileges:
        ops = _strip_privileges(ops, what, stats)
    refuse_unapplicable(
        ops,
        parent_root,
        since_ns=since_ns,
        root_names=root_names,
        landings=landings,
        parent_name=parent_name,
        since=since,
        cannot=cannot,
    )
    return ops


def _linked_or_special(
    ops: Iterable[Op], parent_root: Path
) -> tuple[list[tuple[str, str]], dict[str, os.stat_result]]:
    """Paths whose directory is (or, earlier in the same change, becomes) a symlink, and
    puts of devices, FIFOs or sockets; and the ``lstat`` of each put's source (one per
    source for the whole landing rule)."""
    stats: dict[str, os.stat_result] = {}
    model: dict[str, str | None] = {}  # what the change leaves at a path: d, f, l or None
    seen: dict[str, str | None] = {}
    problems: list[tuple[str, str]] = []
    for op in ordered(ops):
        link = linked_ancestor(op.path, model, parent_root, seen)
        if link is not None:
            problems.append((op.path, f"{op.path}: {link} is a symlink; not followed"))
            continue
        if op.kind == "delete":
            model[op.path] = None
        elif op.kind == "mkdir":
            model[op.path] = "d"
        elif op.kind == "put" and op.source is not None:
            try:
                st = stats[op.source] = os.lstat(op.source)
            except (FileNotFoundError, NotADirectoryError):
                continue  # a replay's source already moved in; the commit engine decides
            odd = special_kind(st.st_mode)
            if odd is not None:
                problems.append((op.path, f"{op.path}: {odd} (only files, directories and "
                                 "symlinks land; remove it in the branch)"))
            elif op.tree:
                problems.extend(_special_in_tree(op.path, Path(op.source)))
            model[op.path] = "l" if stat.S_ISLNK(st.st_mode) else "d" if op.tree else "f"
    return problems, stats


def linked_ancestor(
    rel: str,
    model: dict[str, str | None],
    root: Path,
    seen: dict[str, str | None] | None = None,
) -> str | None:
    """The first directory of ``rel`` that is a symlink: in ``model`` (what the change
    makes of a path so far: d, f, l, or None for gone) or else in ``root``; None when
    there is none (a missing or file ancestor is the structural check's business).
    ``seen`` caches what ``root`` holds at a path across calls (one ``lstat`` per
    directory of a large change, not one per file)."""
    parts = rel.split("/")
    for depth in range(1, len(parts)):
        head = "/".join(parts[:depth])
        kind = model[head] if head in model else _kind_in(root, head, seen)
        if kind == "l":
            return head
        if kind != "d":
            return None  # gone, missing or a file: the structural check refuses it
    return None


def _kind_in(root: Path, rel: str, seen: dict[str, str | None] | None) -> str | None:
    if seen is not None and rel in seen:
        return seen[rel]
    st = lstat_or_none(root / rel)
    kind = None
    if st is not None:
        mode = st.st_mode
        kind = "l" if stat.S_ISLNK(mode) else "d" if stat.S_ISDIR(mode) else "f"
    if seen is not None:
        seen[rel] = kind
    return kind


def linked_steps(steps: Iterable[tuple[str, str | None]], root: Path) -> list[tuple[str, str]]:
    """For a change described before it is staged, as ``(path, what it leaves there: d, f,
    l or None)`` in the order it applies: the paths reached through a symlink (of
    ``root``, or one an earlier step makes). Checked on the request itself, so even a
    step that would turn out to be a no-op (a directory that "already exists" behind a
    link) is refused."""
    steps = list(steps)
    links = {rel for rel, kind in steps if kind == "l"}  # in any order: below a link is out
    model: dict[str, str | None] = {}
    seen: dict[str, str | None] = {}
    problems: list[tuple[str, str]] = []
    for rel, kind in steps:
        parts = rel.split("/")
        heads = ("/".join(parts[:depth]) for depth in range(1, len(parts)))
        link = next((h for h in heads if h in links), None) or linked_ancestor(
            rel, model, root, seen
        )
        if link is not None:
            problems.append((rel, f"{rel}: {link} is a symlink; not followed"))
        model[rel] = kind
    return problems


def _special_in_tree(rel: str, tree: Path) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for dirpath, dirnames, filenames in os.walk(tree):
        for name in dirnames + filenames:
            full = os.path.join(dirpath, name)
            odd = special_kind(os.lstat(full).st_mode)
            if odd is not None:
                sub = f"{rel}/{os.path.relpath(full, tree)}"
                out.append((sub, f"{sub}: {odd} (only files, directories and symlinks land)"))
    return out


def _strip_privileges(ops: list[Op], what: str, stats: dict[str, os.stat_result]) -> list[Op]:
    out: list[Op] = []
    for op in ops:
        if op.kind == "put" and op.source is not None:
            if op.tree:
                strip_tree(Path(op.source), what)
            else:
                strip_file(op.source, what, stats.get(op.source))
        elif op.kind in ("mkdir", "chmod") and op.mode is not None and op.mode & stat.S_ISUID:
            op = replace(op, mode=op.mode & ~stat.S_ISUID)
        out.append(op)
    return out


def strip_file(
    path: Path | str, what: str = "the change", st: os.stat_result | None = None
) -> None:
    """Drop setuid/setgid and file capabilities from one entry (links are left alone;
    ``st`` its ``lstat`` when the caller has it)."""
    if st is None:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            return
    if stat.S_ISDIR(st.st_mode) and st.st_mode & stat.S_ISUID:
        os.chmod(path, stat.S_IMODE(st.st_mode) & ~stat.S_ISUID)
    if not stat.S_ISREG(st.st_mode):
        return  # the kernel honours file capabilities on regular files only
    if st.st_mode & PRIVILEGE_BITS:
        os.chmod(path, stat.S_IMODE(st.st_mode) & ~PRIVILEGE_BITS)
    try:
        # look first: an unprivileged removexattr of a security.* name is EPERM even when
        # the file has none
        os.getxattr(path, CAPABILITY_XATTR, follow_symlinks=False)
        os.removexattr(path, CAPABILITY_XATTR, follow_symlinks=False)
    except OSError as exc:
        if exc.errno not in (errno.ENODATA, errno.ENOTSUP, errno.EOPNOTSUPP):
            raise UnsafeChangeError(
                f"refused to land {what}: cannot remove the file capabilities of "
                f"{os.path.basename(path)} ({exc.strerror}); nothing was applied",
                [os.path.basename(path)],
            ) from exc


def strip_tree(root: Path, what: str = "the change") -> None:
    strip_file(root, what)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            with contextlib.suppress(FileNotFoundError):
                strip_file(Path(dirpath) / name, what)


__all__ = [
    "CAPABILITY_XATTR",
    "PRIVILEGE_BITS",
    "check_landing",
    "linked_ancestor",
    "linked_steps",
    "refuse",
    "special_kind",
    "strip_file",
    "strip_tree",
]
