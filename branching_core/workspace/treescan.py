"""Stat every entry of a tree, and remove a tree, without holding the GIL per entry.

The copy backend diffs a branch's view against the manifest it took at creation, so a
commit stats every entry of the view, and disposing of the branch unlinks every entry.
Done in Python, that is one syscall per entry with the GIL dropped and retaken around
each: a thread that does this back to back starves every other thread of the GIL (each
release wakes the waiting thread, which then loses the race for it and starts waiting
again), which is what froze the fork coordinator's event loop for 20-25 ms during a
copy-backend merge on a loaded machine. Here the per-entry work runs in a child process
(GNU ``find -printf``, ``rm -rf``) while this process only waits on a pipe, with the
GIL released throughout; the parsing left in Python is a short pure-CPU stretch that
the interpreter's switch interval bounds. Where the tools are missing or fail, both
functions fall back to the in-process way, so the results and errors stay the same.
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
from collections.abc import Iterable
from pathlib import Path

from branching_core.workspace.fsutil import PROJECT_STATE_DIR, lstat_or_none, rmtree
from branching_core.workspace.paths import GIT_NAME

# rel path -> (kind "d"/"l"/"f", permission bits, size, mtime_ns, inode)
Stat = tuple[str, int, int, int, int]
# One record per entry, exactly as GNU find prints it with this format (and as
# ``_record`` formats it): "<type> <mode, octal> <size> <sec>.<nsec>0 <inode> <path>".
_FIND_FORMAT = "%y %m %s %T@ %i %P\\0"
_ENV = {"LC_ALL": "C", "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
_TYPES = {
    stat.S_IFDIR: b"d",
    stat.S_IFLNK: b"l",
    stat.S_IFREG: b"f",
    stat.S_IFIFO: b"p",
    stat.S_IFSOCK: b"s",
    stat.S_IFBLK: b"b",
    stat.S_IFCHR: b"c",
}


def kind_of(mode: int) -> str:
    """The manifest's three kinds: anything neither a directory nor a link is a file."""
    if stat.S_ISDIR(mode):
        return "d"
    if stat.S_ISLNK(mode):
        return "l"
    return "f"


def list_tree(root: Path, *, external: bool = True) -> frozenset[bytes]:
    """One record per entry under ``root`` (not ``root`` itself, nor a top-level
    ``.pydantic-deep``, nor any ``.git`` and what it holds: see ``paths``). Two listings
    of the same tree compare record by record in C (set difference), and only the
    records that differ need :func:`parse_records`.
    Raises what ``os.scandir``/``os.lstat`` raise for an unreadable tree."""
    if external and _find_works():
        found = _list_with_find(root)
        if found is not None:
            return found
    return _list_in_process(root)


def parse_records(records: Iterable[bytes]) -> dict[str, Stat]:
    """``{relative path: Stat}`` for listing records (see :func:`list_tree`)."""
    found: dict[str, Stat] = {}
    for record in records:
        kind, mode, size, mtime, ino, rel = record.split(b" ", 5)
        seconds, _, fraction = mtime.partition(b".")
        # find prints tv_sec (signed) and tv_nsec, so "-2.5" is -2 s + 0.5 s
        mtime_ns = int(seconds) * 1_000_000_000 + int(fraction[:9].ljust(9, b"0"))
        found[os.fsdecode(rel)] = (
            "d" if kind == b"d" else "l" if kind == b"l" else "f",
            int(mode, 8),
            int(size),
            mtime_ns,
            int(ino),
        )
    return found


def record_of(rel: str, entry: Stat, type_letter: bytes | None = None) -> bytes:
    """The record :func:`list_tree` gives for an entry (type letter from ``entry``'s
    kind unless given: fifos, sockets and devices have their own)."""
    kind, mode, size, mtime_ns, ino = entry
    seconds, nanos = divmod(mtime_ns, 1_000_000_000)
    letter = type_letter or kind.encode()
    return b"%s %o %d %d.%09d0 %d %s" % (letter, mode, size, seconds, nanos, ino, os.fsencode(rel))


@functools.cache
def _die_with_us() -> tuple[str, ...]:
    """A prefix that makes a child die with its parent (``PR_SET_PDEATHSIG``): an ``rm``
    of a large trash went on for seconds after its owner was SIGKILLed. What it leaves
    is trash, swept by the next open."""
    setpriv = shutil.which("setpriv", path=_ENV["PATH"])
    if setpriv is None:
        return ()
    try:
        ok = subprocess.run([setpriv, "--pdeathsig", "KILL", "--", "true"], env=_ENV,
                            stdin=subprocess.DEVNULL, capture_output=True, check=False,
                            timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        ok = False
    return (setpriv, "--pdeathsig", "KILL", "--") if ok else ()


def remove_tree(path: Path, *, external: bool = True) -> None:
    """Remove ``path`` entirely (like ``fsutil.rmtree``), the bulk of it out of process."""
    remove_trees([path], external=external)


SMALL_TREE = 64  # entries: a tree this small is removed in process (see _remove_small)


def _remove_small(path: Path, budget: int = SMALL_TREE) -> bool:
    """Remove ``path`` here if it holds at most ``budget`` entries (listed first; nothing
    is removed when it holds more). An ``rm`` child costs two ``exec``s (``setpriv``,
    ``rm``), ~2 ms of CPU on a loaded machine, for the few entries of an aborted overlay
    branch (a Ray task's, once per task); listing and removing those here is a few
    syscalls, too short to starve another thread. False (too big, unreadable, an error
    part way) leaves what is left to ``rm``/``rmtree``."""
    files: list[str] = []
    dirs: list[str] = []
    stack = [str(path)]
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            os.unlink(path)
            return True
        while stack:
            top = stack.pop()
            dirs.append(top)
            with os.scandir(top) as entries:
                for entry in entries:
                    if len(files) + len(dirs) + len(stack) >= budget:
                        return False
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    else:
                        files.append(entry.path)
        for name in files:
            os.unlink(name)
        for name in reversed(dirs):  # children before parents
            os.rmdir(name)
    except FileNotFoundError:
        return lstat_or_none(path) is None
    except OSError:
        return False
    return True


def remove_trees(paths: list[Path], *, external: bool = True) -> None:
    """:func:`remove_tree` for several paths with one ``rm`` child for all of them (none
    when each is small enough to remove here)."""
    present = [p for p in paths if lstat_or_none(p) is not None]
    if external:
        present = [p for p in present if not _remove_small(p)]
    if external and present and shutil.which("rm", path=_ENV["PATH"]):
        try:
            subprocess.run(
                [*_die_with_us(), "rm", "-rf", "--", *(str(p) for p in present)],
                env=_ENV,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                check=False,
            )
        except OSError:
            pass
    for path in present:
        rmtree(path)  # whatever rm left (mode-000 directories when not root), or all of it


@functools.cache
def _find_works() -> bool:
    """Is there a ``find`` whose ``-printf`` prints exactly what ``_record`` would (GNU)?"""
    if shutil.which("find", path=_ENV["PATH"]) is None:
        return False
    here = Path(__file__).resolve().parent
    name = Path(__file__).name
    try:
        out = subprocess.run(
            ["find", ".", "-maxdepth", "1", "-name", name, "-printf", _FIND_FORMAT],
            cwd=here,
            env=_ENV,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=True,
            timeout=30,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return out == _record(name, os.lstat(here / name)) + b"\0"


def _list_with_find(root: Path) -> frozenset[bytes] | None:
    try:
        proc = subprocess.run(
            # cwd=root and ".": no pattern or option is ever made of the (arbitrary) path
            [
                "find",
                ".",
                "-mindepth",
                "1",
                "-path",
                f"./{PROJECT_STATE_DIR}",
                "-prune",
                "-o",
                "-name",
                GIT_NAME,
                "-prune",
                "-o",
                "-printf",
                _FIND_FORMAT,
            ],
            cwd=root,
            env=_ENV,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            check=False,
        )
    except OSError:
        return None
    if proc.returncode != 0:
        return None  # unreadable somewhere: the in-process listing raises the real error
    records = proc.stdout.split(b"\0")
    records.pop()  # after the last terminator
    return frozenset(records)


def _record(rel: str, st: os.stat_result) -> bytes:
    entry = (kind_of(st.st_mode), stat.S_IMODE(st.st_mode), st.st_size, st.st_mtime_ns, st.st_ino)
    return record_of(rel, entry, _TYPES.get(stat.S_IFMT(st.st_mode), b"f"))


def _list_in_process(root: Path) -> frozenset[bytes]:
    found: list[bytes] = []
    pending = [(str(root), "")]
    while pending:
        directory, rel_dir = pending.pop()
        with os.scandir(directory) as entries:
            for entry in entries:
                if entry.name == GIT_NAME or (not rel_dir and entry.name == PROJECT_STATE_DIR):
                    continue
                rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
                st = entry.stat(follow_symlinks=False)
                found.append(_record(rel, st))
                if stat.S_ISDIR(st.st_mode):
                    pending.append((entry.path, rel))
    return frozenset(found)


__all__ = [
    "Stat",
    "kind_of",
    "list_tree",
    "parse_records",
    "record_of",
    "remove_tree",
    "remove_trees",
]
