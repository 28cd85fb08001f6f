"""The mount helper's own program: owns a private mount namespace holding overlay views.

This file is executed as ``python -I -S -c <source>`` (never imported by the engine), so
it must only use the standard library and must not import branching_core. It talks
JSON lines over the socket it receives as fd 0:

    {"op": "mount", "lower": [...], "upper": "...", "work": "...", "target": "...",
     "redirect": false}
    {"op": "mount_many", "mounts": [{"lower": ..., "upper": ..., "work": ..., "target": ...}]}
    {"op": "umount", "target": "..."}
    {"op": "create_many", "redirect": false, "branches": [{"dirs": [...], "whiteouts": [...],
     "files": {"path": "text"}, "lower": [...], "upper": ..., "work": ..., "target": ...,
     "spare": "..." or null, "spare_mounted": false}],
     "make_spares": [{"root": ..., "dirs": [...], "whiteouts": [...], "mount": null or
                      {"lower": [...], "redirect": false}}]}
    {"op": "umount_many", "targets": [...]}
    {"op": "ping"}

``create_many`` and ``umount_many`` exist so a fork of N pays one round trip to this
process (and one wake-up of it) for the whole batch instead of one per branch: the
store directories, whiteouts and small files of every branch are made here, right
before its mount, while the caller waits on the socket with its GIL released.

Why a separate process: a private mount namespace entered by the caller would only be
seen by the calling thread (unshare(CLONE_NEWNS) is per thread once threads exist) and
an unprivileged caller cannot create a user namespace while multi-threaded. A helper
that owns the namespace lets every thread and child of the caller reach the views as
``/proc/<helper>/root/<target>``; when the caller dies (even by SIGKILL) the socket
reaches EOF, the helper exits and the kernel drops every mount with the namespace:
no stray mount is ever left on the host.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import shutil
import signal
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
MNT_DETACH = 2

libc = ctypes.CDLL(None, use_errno=True)

# The request shapes, for the type checker only: `typing` is not imported at run time
# (this program starts with `-I -S` on every fork of a new store, so it imports the
# least it can); pyright treats any `TYPE_CHECKING` name as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import io
    from collections.abc import Callable
    from typing import Any, NotRequired, TypedDict

    class _Mount(TypedDict):
        lower: list[str]
        target: str
        upper: NotRequired[str | None]
        work: NotRequired[str | None]
        redirect: NotRequired[bool]

    class _Target(TypedDict):
        target: str

    class _Branch(_Mount):
        dirs: list[str]
        whiteouts: NotRequired[list[str]]
        files: NotRequired[dict[str, str]]
        spare: NotRequired[str | None]
        spare_mounted: NotRequired[bool]

    class _SpareMount(TypedDict):
        lower: list[str]
        redirect: bool

    class _Spare(TypedDict):
        root: str
        dirs: list[str]
        whiteouts: list[str]
        mount: NotRequired[_SpareMount | None]

    class _MountMany(TypedDict):
        mounts: list[_Mount]

    class _CreateMany(TypedDict):
        branches: list[_Branch]
        redirect: NotRequired[bool]
        make_spares: NotRequired[list[_Spare] | None]

    class _UmountMany(TypedDict):
        targets: list[str]



# Spares asked for and not made yet, oldest first: made whenever no request is waiting,
# resumed after every request (not dropped when one arrives); ``ping`` drops the rest
# (a caller about to discard its spares must not see one made after it looked).
_QUEUED: list[_Spare] = []


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _enter_namespace() -> None:
    uid, gid = os.getuid(), os.getgid()
    if uid != 0:
        _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare(user+mount)")
        with open("/proc/self/setgroups", "w") as fh:
            fh.write("deny")
        # The user's own ids inside (as `unshare --map-current-user`), not root: commands
        # run in this namespace (every branch's, `forkdeck run`'s) are the user, as the
        # TUI's !cmd is; the creator keeps its capabilities here for mounting either way.
        with open("/proc/self/uid_map", "w") as fh:
            fh.write(f"{uid} {uid} 1")
        with open("/proc/self/gid_map", "w") as fh:
            fh.write(f"{gid} {gid} 1")
    else:
        _check(libc.unshare(CLONE_NEWNS), "unshare(mount)")
    _check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")


def _escape(path: str) -> str:
    """Overlay splits its options on ',' and lowerdir on ':'; a backslash escapes either
    (and itself) in every directory option (fs/overlayfs: ovl_next_opt, ovl_unescape)."""
    return path.replace("\\", "\\\\").replace(",", "\\,").replace(":", "\\:")


def _mount(req: _Mount) -> None:
    """An overlay view. ``redirect``: trusted.* xattrs with redirect_dir=on (root only;
    directory renames work), else userxattr (the unprivileged format, where renaming a
    lower directory fails with EXDEV). Without ``upper`` the mount is read-only."""
    lower = ":".join(_escape(p) for p in req["lower"])
    upper, work = req.get("upper"), req.get("work")
    if upper is None or work is None:
        options = f"lowerdir={lower},redirect_dir=follow"
    else:
        upper, work = _escape(upper), _escape(work)
        xattrs = "redirect_dir=on" if req.get("redirect") else "userxattr"
        options = f"lowerdir={lower},upperdir={upper},workdir={work},{xattrs},volatile"
    data = options.encode()
    if len(data) >= 4096:
        raise OSError(
            7, "overlay mount options exceed one page; nesting is too deep for this path length"
        )
    _check(libc.mount(b"overlay", req["target"].encode(), b"overlay", 0, data), "mount overlay")
    work = req.get("work")
    if work is not None:
        # The kernel makes work/work mode 000. Root removes it anyway; the user a store
        # belongs to could not (``rm -rf`` of a cache, a store left by a killed process),
        # so it gets the owner's rights back: the kernel never checks them.
        # (and so are the directories it makes in it: incompat/volatile)
        top = os.path.join(work, "work")
        try:
            os.chmod(top, 0o700)
            for where, dirs, _files in os.walk(top):
                for name in dirs:
                    os.chmod(os.path.join(where, name), 0o700)
        except OSError:
            pass


def _unmount_quietly(done: list[_Mount]) -> None:
    """Undo the mounts of a batch that failed part way (all or none); the batch's own
    error is what the caller hears, not a failure of this cleanup."""
    for one in done:
        try:
            _umount(one)
        except OSError:
            pass


def _mount_many(req: _MountMany) -> None:
    done: list[_Mount] = []
    try:
        for one in req["mounts"]:
            _mount(one)
            done.append(one)
    except OSError:
        _unmount_quietly(done)
        raise


def _umount(req: _Target | _Mount) -> None:
    _check(libc.umount2(req["target"].encode(), MNT_DETACH), "umount")


def _prepare(one: _Branch) -> bool:
    """A branch's store directories (in order, the first one new) and its whiteouts.

    With ``spare`` (a directory made ahead by ``_make_spares``, holding exactly those
    directories and whiteouts) one rename replaces the mkdirs and mknods; a spare that
    is not there (never made, or taken) falls back to making them here. Returns True
    when the spare taken was already mounted (``spare_mounted``): its mount moved with
    it, there is nothing left to mount."""
    spare = one.get("spare")
    if spare:
        _forget(spare)  # not made yet: this branch is made here, never the spare
        try:
            os.rename(spare, one["dirs"][0])
            return bool(one.get("spare_mounted"))
        except OSError:
            pass
    for path in one["dirs"]:
        os.mkdir(path, 0o755)
    for path in one.get("whiteouts", ()):
        os.mknod(path, 0o20600, 0)  # a character device 0/0 is an overlay whiteout
    return False


def _write_files(one: _Branch) -> None:
    """A branch's small files, written once under new names (nothing is overwritten)."""
    for path, text in one.get("files", {}).items():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        try:
            data = text.encode()
            while data:
                data = data[os.write(fd, data) :]
        finally:
            os.close(fd)


def _forget(root: str) -> None:
    """Drop a queued spare that a request named before it was made."""
    _QUEUED[:] = [spare for spare in _QUEUED if spare["root"] != root]


def _make_spares(waiting: Callable[[], bool]) -> None:
    """Make the queued spare store directories for later batches (while the caller is
    busy with the branches it just got): each is built under a ``.part`` name and renamed
    into place, so a spare is complete or absent. Pauses as soon as a request is
    ``waiting`` (a commit must not queue behind spares nobody asked for yet) and resumes
    once it is answered; drops the rest at the first error. A branch naming a spare not
    made yet is made the ordinary way (and the spare is dropped, see ``_prepare``)."""
    while _QUEUED and not waiting():
        spare = _QUEUED.pop(0)
        root = spare["root"]
        part = root + ".part"
        mounted: _Mount | None = None
        try:
            # only the spare directory itself: a store removed meanwhile stays removed
            try:
                os.mkdir(os.path.dirname(root), 0o755)
            except FileExistsError:
                pass
            os.mkdir(part, 0o755)
            for rel in spare["dirs"]:
                os.mkdir(os.path.join(part, rel), 0o755)
            for rel in spare["whiteouts"]:
                os.mknod(os.path.join(part, rel), 0o20600, 0)
            mount = spare.get("mount")
            if mount:  # a view mounted ahead: its mount moves with the directory
                mounted = {
                    "lower": mount["lower"],
                    "upper": os.path.join(part, "upper"),
                    "work": os.path.join(part, "work"),
                    "target": os.path.join(part, "view"),
                    "redirect": mount["redirect"],
                }
                _mount(mounted)
            os.rename(part, root)
        except OSError:
            if mounted is not None:
                try:
                    _umount(mounted)
                except OSError:
                    pass
            shutil.rmtree(part, ignore_errors=True)
            _QUEUED.clear()
            return


def _create_many(req: _CreateMany) -> None:
    """Prepare and mount every branch of a batch; all or none. On failure the mounts
    made are undone and the error names the branch; the caller removes the directories
    (it knows which store directories are its own). The spares asked for are queued,
    to be made once the reply is sent."""
    done: list[_Mount] = []
    try:
        for one in req["branches"]:
            premounted = _prepare(one)
            if premounted:
                done.append(one)  # mounted: undone like the others on a failure
            _write_files(one)
            if not premounted:
                mount: _Mount = {
                    "lower": one["lower"],
                    "upper": one.get("upper"),
                    "work": one.get("work"),
                    "target": one["target"],
                    "redirect": req.get("redirect", False),
                }
                _mount(mount)
                done.append(one)
    except OSError:
        _unmount_quietly(done)
        raise
    _QUEUED.extend(req.get("make_spares") or [])


def _umount_many(req: _UmountMany) -> None:
    """Unmount every target (lazily, like ``umount``); a failure does not stop the rest.
    Raises naming the targets that are still mounted, so the caller keeps those."""
    failed: list[str] = []
    errors: list[OSError] = []
    for target in req["targets"]:
        try:
            _umount({"target": target})
        except OSError as exc:
            failed.append(target)
            errors.append(exc)
    if errors:
        raise _Partial(errors[0].errno, f"{errors[0].strerror}", failed)


class _Partial(OSError):
    def __init__(self, errno: int | None, message: str, failed: list[str]) -> None:
        super().__init__(errno, message)
        self.failed = failed


def _waiting(sock: io.FileIO, pending: bool) -> Callable[[], bool]:
    """Is a request waiting (already read into the buffer, or readable on the socket)?"""
    return lambda: pending or bool(select.select([sock], [], [], 0)[0])


def _handle(req: Any) -> None:
    """Run one request (``req`` is the decoded JSON line, shaped as the docstring says)."""
    op = req["op"]
    if op == "mount":
        _mount(req)
    elif op == "mount_many":
        _mount_many(req)
    elif op == "umount":
        _umount(req)
    elif op == "create_many":
        _create_many(req)
    elif op == "umount_many":
        _umount_many(req)
    elif op == "ping":
        _QUEUED.clear()  # nothing is made after this is answered
    else:
        raise KeyError(op)


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    sock = os.fdopen(0, "rb", buffering=0)
    out = os.fdopen(1, "wb", buffering=0)
    try:
        _enter_namespace()
    except OSError as exc:
        out.write(
            (json.dumps({"ok": False, "error": str(exc), "errno": exc.errno}) + "\n").encode()
        )
        return 1
    out.write((json.dumps({"ok": True, "pid": os.getpid()}) + "\n").encode())
    buffer: bytes = b""
    while True:
        chunk: bytes | None = sock.read(65536)
        if not chunk:
            return 0  # the owner is gone: exiting drops every mount with the namespace
        buffer += chunk
        while (end := buffer.find(b"\n")) >= 0:
            line, buffer = buffer[:end], buffer[end + 1 :]
            req = json.loads(line)
            reply: dict[str, object]
            try:
                _handle(req)
                reply = {"ok": True}
            except OSError as exc:
                reply = {"ok": False, "error": str(exc), "errno": exc.errno}
                if isinstance(exc, _Partial):
                    reply["failed"] = exc.failed
            out.write((json.dumps(reply) + "\n").encode())
        # idle (or between requests): the spares queued so far, paused while one waits
        if _QUEUED:
            _make_spares(_waiting(sock, bool(buffer)))


sys.exit(main())
