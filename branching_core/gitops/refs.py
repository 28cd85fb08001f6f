"""Commits made inside a branch: kept as a ref ``forkdeck/<fork>/<label>`` in the parent.

A branch's ``.git`` is a copy-on-write view of the parent's (or, for a worktree or
submodule, a private repository borrowing the parent's objects: see ``shadow``), so a
``git commit`` in the branch writes its objects and moves its refs there only. When the
branch lands, its HEAD commit, if the parent does not have it, is fetched into the
parent's repository under ``refs/heads/forkdeck/...``: objects copied in, one new ref,
nothing else touched (no FETCH_HEAD, no other ref, not the index, not HEAD). Refs the
branch itself received this way (a nested fork) come along under their own names.

The branch is read through its git directory only (``--git-dir``): a view reached
through ``/proc/<pid>/root`` is not a usable working directory for git.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from branching_core.gitops._run import GitError, git, git_binary, out

REF_ROOT = "refs/heads/forkdeck/"


@dataclass
class LandedCommits:
    """The ref made in the parent (``forkdeck/<fork>/<label>``), the commit it names, how
    many commits the branch made, and whether the parent's branch fast-forwarded."""

    ref: str | None = None
    commit: str | None = None
    count: int = 0
    fast_forwarded: str | None = None
    carried: list[str] = field(default_factory=list)
    note: str | None = None

    @property
    def line(self) -> str | None:
        if self.note is not None:
            return f"git: {self.note}"
        if self.ref is None:
            if self.carried:
                names = ", ".join(c.removeprefix("refs/heads/") for c in self.carried)
                return f"git: commits of nested branches kept as {names}"
            return None
        short = self.ref.removeprefix("refs/heads/")
        text = f"git: {self.count} commit(s) made in the branch kept as {short}"
        if self.carried:
            text += " (and " + ", ".join(c.removeprefix("refs/heads/") for c in self.carried) + ")"
        if self.fast_forwarded:
            text += f"; {self.fast_forwarded} fast-forwarded to it"
        return text


def ref_name(*parts: str) -> str:
    """``refs/heads/forkdeck/<parts...>`` with every part made a valid ref component."""
    safe = [re.sub(r"[^A-Za-z0-9_.-]+", "-", p).strip(".-") or "branch" for p in parts]
    safe = [s[:-5] + "-lock" if s.endswith(".lock") else s for s in safe]
    return REF_ROOT + "/".join(s.replace("..", "-") for s in safe)


def branch_git_dir(view: Path, write_layer: Path | None = None) -> Path | None:
    """The branch's own git directory (``<view>/.git``), when the view holds one.

    A private git directory (``shadow``) borrows objects through alternates, and git
    resolves an object directory's real path before reading alternates: through a
    ``/proc/<pid>/root`` view that resolves to a path of the helper's namespace and
    fails. Such a directory is new in the branch, so it lies whole in the branch's
    ``write_layer`` (the overlay upper), which is read instead."""
    if write_layer is not None:
        own = write_layer / ".git"
        if (own / "objects" / "info" / "alternates").is_file() and (own / "HEAD").is_file():
            return own
    gd = view / ".git"
    return gd if gd.is_dir() else None


def land_branch_commits(
    view: Path | str,
    parent_root: Path | str,
    ref: str,
    *,
    fast_forward: bool = False,
    write_layer: Path | None = None,
) -> LandedCommits:
    """Fetch the commits the branch at ``view`` made into the repository of
    ``parent_root`` as ``ref``; optionally fast-forward the parent's current branch to
    them (only if the parent's HEAD is their ancestor, i.e. it has not moved). Never
    raises: a failure is the result's ``note``."""
    gd = branch_git_dir(Path(view), write_layer)
    if gd is None or git_binary() is None:  # no repository, or no git to have made commits
        return LandedCommits()
    try:
        return _land(gd, Path(parent_root), ref, ff=fast_forward)
    except (GitError, OSError) as exc:
        return LandedCommits(note=f"the branch's commits were not kept: {exc}")


def _land(gd: Path, parent: Path, ref: str, *, ff: bool) -> LandedCommits:
    head = git(["rev-parse", "-q", "--verify", "HEAD^{commit}"], git_dir=gd, check=False)
    result = LandedCommits()
    own = parent / ".git"  # a branch view as parent (nested fork): use its git dir alone
    parent_gd = (
        own if own.is_dir() else Path(out(["rev-parse", "--absolute-git-dir"], cwd=parent))
    )
    specs: list[str] = []
    if head.returncode == 0:
        oid = head.stdout.decode().strip()
        if not _has(parent_gd, oid):
            specs.append(f"+{oid}:{ref}")
            result.ref, result.commit = ref, oid
            result.count = _count_new(gd, oid, parent_gd)
    # forkdeck refs the branch received from forks of its own
    mine = _forkdeck_refs(gd)
    theirs = _forkdeck_refs(parent_gd)
    for name, oid in sorted(mine.items()):
        if name in theirs or name == ref:
            continue
        if result.ref is not None and name.startswith(ref + "/"):
            # "forkdeck/a" and "forkdeck/a/b" cannot both be refs: "forkdeck/a-b"
            name = ref + "-" + name[len(ref) + 1 :].replace("/", "-")
        specs.append(f"{oid}:{name}")
        result.carried.append(name)
    if not specs:
        return result
    git(
        ["fetch", "--no-write-fetch-head", "--no-tags", "--no-auto-gc", "-q", str(gd), *specs],
        git_dir=parent_gd,
    )
    if ff and result.commit is not None:
        result.fast_forwarded = fast_forward(parent, result.commit)
    return result


def _has(git_dir: Path, oid: str) -> bool:
    proc = git(["cat-file", "-e", f"{oid}^{{commit}}"], git_dir=git_dir, check=False)
    return proc.returncode == 0


def _count_new(gd: Path, oid: str, parent_gd: Path) -> int:
    """Commits reachable from ``oid`` that the parent lacks (walked in the branch)."""
    proc = git(["rev-list", oid], git_dir=gd, check=False)
    count = 0
    for line in proc.stdout.decode().split():
        if _has(parent_gd, line):
            break
        count += 1
    return count


def _forkdeck_refs(git_dir: Path) -> dict[str, str]:
    proc = git(
        ["for-each-ref", "--format=%(objectname) %(refname)", REF_ROOT], git_dir=git_dir,
        check=False,
    )
    refs = {}
    for line in proc.stdout.decode().splitlines():
        oid, _, name = line.partition(" ")
        refs[name] = oid
    return refs


def fast_forward(parent: Path, commit: str) -> str | None:
    """Move the parent's current branch to ``commit`` when that is a fast-forward, and
    give its index the new commit's entries for the paths that changed (the working tree
    already holds them: the branch's files landed). Returns the branch moved, or None."""
    branch = git(["symbolic-ref", "-q", "HEAD"], cwd=parent, check=False)
    if branch.returncode != 0:
        return None
    ref = branch.stdout.decode().strip()
    old = out(["rev-parse", "-q", "--verify", "HEAD^{commit}"], cwd=parent)
    if git(["merge-base", "--is-ancestor", old, commit], cwd=parent, check=False).returncode:
        return None  # HEAD moved since the branch was made: no fast-forward
    changed = git(["diff-tree", "-r", "-z", "--name-only", "--no-renames", old, commit], cwd=parent)
    git(["update-ref", "-m", "forkdeck: fast-forward to the branch's commits", ref, commit, old],
        cwd=parent)
    if changed.stdout.strip(b"\0"):
        top = out(["rev-parse", "--show-toplevel"], cwd=parent)  # diff-tree paths are top's
        git(["reset", "-q", "--no-refresh", commit, "--pathspec-from-file=-",
             "--pathspec-file-nul"], cwd=top, input=changed.stdout)
    return ref.removeprefix("refs/heads/")


__all__ = [
    "REF_ROOT",
    "LandedCommits",
    "branch_git_dir",
    "fast_forward",
    "land_branch_commits",
    "ref_name",
]
