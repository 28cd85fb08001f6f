"""Commit exactly the landed paths, leaving everything else of the user's alone.

How: a temporary index made from HEAD's tree (never the user's index, which may hold
staged work of theirs), the landed paths updated in it from the working tree, a tree
written from it and a commit made of that tree with HEAD as parent; the hooks
(``pre-commit``, ``commit-msg``, ``post-commit``) run against that temporary index, as
they would for ``git commit``. The branch ref moves with compare-and-swap (a HEAD moved
meanwhile fails the update, nothing is lost). Finally the user's real index gets the
committed entries for the landed paths only, so ``git status`` shows them clean while
every other staged or unstaged change stays exactly as it was.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from branching_core.gitops._run import GitError, first_line, git, out
from branching_core.gitops.state import RepoState, repo_state

_NUL = b"\0"


@dataclass
class GitCommitResult:
    """What a landing commit did: ``commit`` made on ``branch`` (``None`` and a ``note``
    saying why when no commit was made)."""

    commit: str | None = None
    branch: str | None = None
    paths: int = 0
    note: str | None = None

    @property
    def line(self) -> str:
        if self.commit is None:
            return f"git: not committed: {self.note}"
        return f"git: committed {self.paths} path(s) as {self.commit[:10]} on {self.branch}"


def check_branch_name(root: Path | str, name: str) -> str | None:
    """Why ``name`` cannot be a new branch here (one line), or ``None``."""
    proc = git(["check-ref-format", "--branch", name], cwd=root, check=False)
    if proc.returncode != 0 or name.startswith("-"):
        return f"{name!r} is not a valid branch name"
    exists = git(["show-ref", "--verify", "-q", f"refs/heads/{name}"], cwd=root, check=False)
    if exists.returncode == 0:
        return f"a branch named {name!r} already exists"
    return None


def precheck(root: Path | str, *, new_branch: str | None = None) -> str | None:
    """Why a landing commit cannot be made in ``root`` (one line), or ``None``: not a
    repository, mid-merge/rebase, detached HEAD (unless a new branch is asked), a bad or
    taken branch name. Checked before anything lands, for all-or-nothing landings."""
    state = repo_state(root, with_dirty=False)
    if state is None:
        return f"{root} is not in a git repository"
    why = state.refusal(new_branch=new_branch is not None)
    if why is None and new_branch is not None:
        why = check_branch_name(root, new_branch)
    return why


def commit_paths(
    root: Path | str,
    paths: list[str],
    message: str,
    *,
    new_branch: str | None = None,
    run_hooks: bool = True,
) -> GitCommitResult:
    """Commit the current working-tree state of ``paths`` (relative to the workspace
    ``root``; directories stand for what they hold) on the current branch, or on
    ``new_branch`` made at HEAD and checked out in place (the working tree is not
    touched). Never raises for the repository's state: the result's ``note`` says why
    nothing was committed (mid-merge, detached HEAD, hook refused, nothing changed)."""
    root = Path(root)
    state = repo_state(root, with_dirty=False)
    if state is None:
        return GitCommitResult(note=f"{root} is not in a git repository")
    why = state.refusal(new_branch=new_branch is not None)
    if why is None and new_branch is not None:
        why = check_branch_name(root, new_branch)
    if why is not None:
        return GitCommitResult(note=why)
    try:
        return _commit(root, state, paths, message, new_branch, run_hooks)
    except GitError as exc:
        return GitCommitResult(note=str(exc))


def _commit(
    root: Path,
    state: RepoState,
    paths: list[str],
    message: str,
    new_branch: str | None,
    run_hooks: bool,
) -> GitCommitResult:
    top = state.toplevel
    files = _expand(root, paths)
    full = [state.prefix + p for p in files]
    fd, tmp_name = tempfile.mkstemp(prefix="forkdeck-index-", dir=state.git_dir)
    os.close(fd)
    os.unlink(tmp_name)  # git wants to create it (an empty file is not an index)
    tmp_env = {"GIT_INDEX_FILE": tmp_name}
    msg_path = state.git_dir / "FORKDECK_COMMIT_MSG"
    try:
        if state.head is not None:
            git(["read-tree", state.head], cwd=top, env=tmp_env)
        else:
            git(["read-tree", "--empty"], cwd=top, env=tmp_env)
        wanted = _not_ignored(top, full, tmp_env)
        present = [p for p in wanted if _is_file_like(top / p)]
        gone = [p for p in wanted if not _is_file_like(top / p)]
        if gone:
            git(
                ["update-index", "-z", "--force-remove", "--stdin"],
                cwd=top,
                env=tmp_env,
                input=_NUL.join(os.fsencode(p) for p in gone) + _NUL,
            )
        if present:
            git(
                ["update-index", "-z", "--add", "--replace", "--stdin"],
                cwd=top,
                env=tmp_env,
                input=_NUL.join(os.fsencode(p) for p in present) + _NUL,
            )
        tree = out(["write-tree"], cwd=top, env=tmp_env)
        if state.head is not None and tree == out(["rev-parse", f"{state.head}^{{tree}}"], cwd=top):
            return GitCommitResult(note="nothing to commit: the landed files equal HEAD's")
        msg_path.write_text(message.rstrip("\n") + "\n")
        if run_hooks:
            refused = _hook(top, "pre-commit", [], tmp_env) or _hook(
                top, "commit-msg", [str(msg_path)], tmp_env
            )
            if refused:
                return GitCommitResult(note=refused)
        parents = ["-p", state.head] if state.head is not None else []
        commit = out(["commit-tree", tree, *parents, "-F", str(msg_path)], cwd=top)
        subject = msg_path.read_text().split("\n", 1)[0]
        branch = new_branch or state.branch
        assert branch is not None
        ref = f"refs/heads/{branch}"
        old = "" if new_branch is not None or state.head is None else state.head
        git(["update-ref", "-m", f"commit (forkdeck): {subject}", ref, commit, old], cwd=top)
        if new_branch is not None:
            git(["symbolic-ref", "-m", f"forkdeck: switch to {new_branch}", "HEAD", ref], cwd=top)
        _sync_real_index(top, commit, full)
        if run_hooks:
            _hook(top, "post-commit", [], None)
        return GitCommitResult(commit=commit, branch=branch, paths=len(present) + len(gone))
    finally:
        for leftover in (Path(tmp_name), Path(tmp_name + ".lock"), msg_path):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()


def _expand(root: Path, paths: list[str]) -> list[str]:
    """Files (and symlinks) for ``paths``: a directory stands for every file under it,
    without any ``.git``; a path gone from the working tree stays (a deletion)."""
    files: set[str] = set()
    for rel in paths:
        full = root / rel
        try:
            st = os.lstat(full)
        except FileNotFoundError:
            files.add(rel)
            continue
        if not stat.S_ISDIR(st.st_mode):
            files.add(rel)
            continue
        files.add(rel)  # a file that became a directory: its old entry is removed
        for dirpath, dirnames, filenames in os.walk(full):
            dirnames[:] = [d for d in dirnames if d != ".git"]
            rel_dir = os.path.relpath(dirpath, root)
            for name in filenames:
                if name != ".git":
                    files.add(f"{rel_dir}/{name}")
            for name in dirnames:
                if os.path.islink(os.path.join(dirpath, name)):
                    files.add(f"{rel_dir}/{name}")
    return sorted(p for p in files if ".git" not in p.split("/"))


def _is_file_like(path: Path) -> bool:
    try:
        return not stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        return False


def _not_ignored(top: Path, paths: list[str], env: dict[str, str]) -> list[str]:
    """Drop untracked paths that .gitignore ignores (build output the winner left)."""
    if not paths:
        return []
    proc = git(
        ["check-ignore", "-z", "--stdin"],
        cwd=top,
        env={**env, "GIT_LITERAL_PATHSPECS": "0"},  # check-ignore takes no pathspec magic
        input=_NUL.join(os.fsencode(p) for p in paths) + _NUL,
        check=False,
    )
    ignored = {os.fsdecode(p) for p in proc.stdout.split(_NUL) if p}
    return [p for p in paths if p not in ignored]


def _hook(top: Path, name: str, args: list[str], env: dict[str, str] | None) -> str | None:
    """Run a hook if the repository has it; a one-line refusal when it fails."""
    argv = ["hook", "run", "--ignore-missing", name, "--", *args]
    proc = git(argv, cwd=top, env=env, check=False)
    if proc.returncode == 0:
        return None
    return f"the {name} hook refused the commit: {first_line(proc.stderr or proc.stdout)}"


def _sync_real_index(top: Path, commit: str, full: list[str]) -> None:
    """The user's index takes the committed entries of the landed paths, and only those."""
    if not full:
        return
    git(
        ["reset", "-q", "--no-refresh", commit, "--pathspec-from-file=-", "--pathspec-file-nul"],
        cwd=top,
        input=_NUL.join(os.fsencode(p) for p in full) + _NUL,
        check=False,
    )


__all__ = ["GitCommitResult", "check_branch_name", "commit_paths", "precheck"]
