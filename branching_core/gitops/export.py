"""A branch's change as a patch or a git branch, without landing anything.

The tree is built in the parent's repository: a temporary index made from HEAD's tree,
each changed path's content (read from the branch's view, hashed into the parent's
object store: objects only, no ref, no working-tree file, not the user's index) put in
it, deletions removed. The patch is ``git diff --binary --full-index HEAD <tree>``, so
``git apply`` on a clean clone takes it, binary files included; the branch is one commit
of that tree on top of HEAD.

Known limit: a changed file's content is taken whole from the branch, so edits the user
had left uncommitted in that same file before the fork are part of the export; and
clean filters (``.gitattributes``: LFS, eol) are not applied to the exported blobs.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from branching_core.gitops._run import GitError, git, out
from branching_core.gitops.state import repo_state

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
_ZERO = "0" * 40
_NUL = b"\0"


@dataclass
class ExportedTree:
    """The tree of HEAD plus the branch's change, in the parent's repository."""

    top: Path
    head: str | None
    tree: str
    paths: int


def build_tree(view: Path | str, parent_root: Path | str, paths: list[str]) -> ExportedTree:
    """HEAD's tree with ``paths`` (relative to the workspace) as the branch at ``view``
    has them. Raises :class:`GitError` when the parent is not in a repository."""
    view, parent_root = Path(view), Path(parent_root)
    state = repo_state(parent_root, with_dirty=False)
    if state is None:
        raise GitError(f"{parent_root} is not in a git repository")
    top, prefix = state.toplevel, state.prefix
    fd, tmp_name = tempfile.mkstemp(prefix="forkdeck-export-", dir=state.git_dir)
    os.close(fd)
    os.unlink(tmp_name)
    env = {"GIT_INDEX_FILE": tmp_name}
    try:
        git(["read-tree", state.head or "--empty"], cwd=top, env=env)
        removals: list[str] = []
        regular: list[tuple[str, int]] = []  # (rel, mode)
        links: list[tuple[str, str]] = []
        for rel in sorted(set(paths)):
            _collect(view, rel, removals, regular, links)
        lines: list[bytes] = []
        for rel in removals:  # the path and everything the index holds under it
            listed = git(["ls-files", "-z", "--", prefix + rel], cwd=top, env=env).stdout
            for entry in [prefix + rel, *(os.fsdecode(e) for e in listed.split(_NUL) if e)]:
                lines.append(f"0 {_ZERO}\t{entry}".encode())
        if regular:
            oids = out(
                ["hash-object", "-w", "--no-filters", "--stdin-paths"],
                cwd=top,
                input=b"\n".join(os.fsencode(view / rel) for rel, _ in regular) + b"\n",
            ).split()
            for (rel, mode), oid in zip(regular, oids, strict=True):
                lines.append(f"{mode:o} {oid}\t{prefix}{rel}".encode())
        for rel, target in links:
            oid = out(["hash-object", "-w", "--stdin"], cwd=top, input=os.fsencode(target))
            lines.append(f"120000 {oid}\t{prefix}{rel}".encode())
        if lines:
            git(["update-index", "-z", "--index-info"], cwd=top, env=env,
                input=_NUL.join(lines) + _NUL)
        tree = out(["write-tree"], cwd=top, env=env)
    finally:
        for leftover in (Path(tmp_name), Path(tmp_name + ".lock")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
    return ExportedTree(top, state.head, tree, len(regular) + len(links) + len(removals))


def _collect(
    view: Path,
    rel: str,
    removals: list[str],
    regular: list[tuple[str, int]],
    links: list[tuple[str, str]],
) -> None:
    if ".git" in rel.split("/"):
        return
    full = view / rel
    try:
        st = os.lstat(full)
    except FileNotFoundError:
        removals.append(rel)
        return
    if stat.S_ISLNK(st.st_mode):
        links.append((rel, os.readlink(full)))
    elif stat.S_ISREG(st.st_mode):
        regular.append((rel, 0o100755 if st.st_mode & 0o111 else 0o100644))
    elif stat.S_ISDIR(st.st_mode):
        removals.append(rel)  # a file that became a directory
        for child in sorted(os.listdir(full)):
            if child != ".git":
                _collect(view, f"{rel}/{child}", [], regular, links)


def export_patch(view: Path | str, parent_root: Path | str, paths: list[str]) -> bytes:
    """The branch's change as a binary-safe patch against the parent's HEAD."""
    built = build_tree(view, parent_root, paths)
    return git(
        ["diff-tree", "-p", "--binary", "--full-index", "--no-renames", "--no-color",
         built.head or EMPTY_TREE, built.tree],
        cwd=built.top,
    ).stdout


def export_branch(
    view: Path | str, parent_root: Path | str, paths: list[str], name: str, message: str
) -> str:
    """A new branch ``name``: one commit on top of the parent's HEAD holding the branch's
    change. Returns the commit. The working tree, the index and HEAD are not touched."""
    from branching_core.gitops.commit import check_branch_name

    why = check_branch_name(parent_root, name)
    if why is not None:
        raise GitError(why)
    built = build_tree(view, parent_root, paths)
    parents = ["-p", built.head] if built.head else []
    commit = out(["commit-tree", built.tree, *parents], cwd=built.top,
                 input=message.rstrip("\n").encode() + b"\n")
    git(["update-ref", "-m", "forkdeck export", f"refs/heads/{name}", commit, ""], cwd=built.top)
    return commit


__all__ = ["ExportedTree", "build_tree", "export_branch", "export_patch"]
