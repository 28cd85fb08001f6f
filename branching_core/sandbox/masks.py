"""What a sandbox hides beyond the read-only host: branch stores and the user's secrets.

Decided in the caller (paths, environment), applied in the child by mounting an empty
read-only tmpfs over each directory. The branch's own view is grabbed before anything
is covered and mounted back on top, so it stays reachable at its path.

Branch stores hold every branch's uncommitted files (``<store>/<branch>/view``): a
branch must not read its siblings' work, nor other workspaces' branches. A store root
is recognised by its ``workspace`` marker file; the places stores are kept by default
(``$FORKDECK_STORE``, ``~/.cache/forkdeck/stores``, ``.forkdeck-stores`` beside a
workspace) are hidden whole.

Secrets: a model-driven command should not read credentials, even when the caller
is root (uid 0 reads every 0600 file). Unless the branch passes
``expose_secrets=True``, the sandbox masks, as a container would not have them at all:
the caller's home, ``/root`` and other users' homes (``/home/*`` and regular users'
homes elsewhere), the shadow files and SSH host keys, and the credential files and
directories cloud tools are pointed at by environment variables
(``GOOGLE_APPLICATION_CREDENTIALS``, ``AWS_SHARED_CREDENTIALS_FILE``, ``KUBECONFIG``,
``DOCKER_CONFIG``, ...). Shown again read-only: the caller's interpreter, its
``sys.path`` and ``PATH`` directories (so a branch's ``python -m pytest`` still runs),
tool installations in the home (``~/.rustup``, ``~/.pyenv``, ``~/.nvm``, ``~/.local/lib``,
...) and ``~/.gitconfig`` (so ``git commit`` keeps its identity), never anything holding a
credential store (``~/.ssh``, ``~/.aws``, ``~/.config/gcloud``, ``~/.docker``,
``~/.kube``, ``~/.netrc``, ...); the branch's own view is always mounted back on top.
"""

from __future__ import annotations

import functools
import glob
import os
import pwd
import stat
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

from branching_core.sandbox.fswatch import DirWatch, Unwatchable

_STORE_MARKER = "workspace"
_STORE_BASE_NAME = ".forkdeck-stores"


def _is_store_root(path: str) -> bool:
    return (os.path.isfile(os.path.join(path, _STORE_MARKER))
            and os.path.isdir(os.path.join(path, "sessions")))


def _ancestors(path: str) -> list[str]:
    out: list[str] = []
    while True:
        parent = os.path.dirname(path)
        if parent == path:
            return out
        out.append(parent)
        path = parent


def store_dirs(view: str, target: str) -> list[str]:
    """Store directories to hide for a sandbox showing ``view`` at ``target``."""
    # Imported here: the sandbox package stays importable without the store's imports
    # (hashlib, json, shutil, ...).
    from branching_core.workspace.store import STORE_ENV

    found: list[str] = []
    explicit = os.environ.get(STORE_ENV)
    if explicit:
        found.append(explicit)
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    found.append(os.path.join(cache, "forkdeck", "stores"))
    for place in (view, target) if target != view else (view,):
        found.append(os.path.join(os.path.dirname(place), _STORE_BASE_NAME))
        for ancestor in _ancestors(place):
            if os.path.basename(ancestor) == _STORE_BASE_NAME:
                found.append(ancestor)
            elif _is_store_root(ancestor):  # an explicit Workspace(store=...)
                found.append(ancestor)
                break
    return [p for p in dict.fromkeys(found) if _is_dir(p)]  # (each place checked once)


def _is_dir(path: str) -> bool:
    try:
        return os.path.isdir(path) and not os.path.islink(path)
    except OSError:
        return False


# The caller's own credential stores, relative to its home.
HOME_SECRET_DIRS = (
    ".ssh", ".aws", ".azure", ".config/gcloud", ".docker", ".kube", ".gnupg",
    ".password-store", ".config/gh", ".config/hub", ".local/share/keyrings", ".terraform.d",
)
HOME_SECRET_FILES = (
    ".netrc", ".git-credentials", ".pypirc", ".npmrc", ".yarnrc", ".vault-token", ".boto",
    ".s3cfg", ".dockercfg", ".cargo/credentials", ".cargo/credentials.toml", ".pgpass",
    ".my.cnf",
)
SYSTEM_SECRET_FILES = (
    "/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/ssh/ssh_host_*_key",
)
# Environment variables naming credential files (":"-separated lists allowed) or dirs.
ENV_SECRET_FILES = ("GOOGLE_APPLICATION_CREDENTIALS", "AWS_SHARED_CREDENTIALS_FILE",
                    "AWS_CONFIG_FILE", "KUBECONFIG", "AWS_WEB_IDENTITY_TOKEN_FILE")
ENV_SECRET_DIRS = ("AZURE_CONFIG_DIR", "DOCKER_CONFIG", "CLOUDSDK_CONFIG", "GNUPGHOME")
_FIRST_REGULAR_UID = 1000
HOME_SHOWN_FILES = (".gitconfig", ".config/git/config")
# Tool installations in the caller's home, shown again read-only (toolchains, not data).
HOME_TOOL_DIRS = (".rustup", ".cargo/bin", ".pyenv", ".nvm", ".volta", ".bun", ".deno",
                  ".local/bin", ".local/lib", ".sdkman", ".ghcup", "go/bin", ".juliaup")


@dataclass(frozen=True)
class SecretMasks:
    """Directories to cover with an empty tmpfs and files to cover with an empty file;
    ``credentials`` are the places nothing may re-expose (homes are masked whole, but
    the caller's interpreter inside one may be shown again)."""

    dirs: tuple[str, ...]
    files: tuple[str, ...]
    credentials: tuple[str, ...] = ()
    shown_files: tuple[str, ...] = ()  # harmless files inside ``dirs`` shown again


def _home() -> str:
    return os.path.realpath(os.path.expanduser("~"))


def _user_homes() -> tuple[str, ...]:
    """Homes of regular users from the password database (they may live elsewhere)."""
    return tuple(user.pw_dir for user in pwd.getpwall()
                 if user.pw_uid >= _FIRST_REGULAR_UID and user.pw_uid != 65534)


def _home_candidates(own: str, user_homes: tuple[str, ...]) -> list[str]:
    homes = [own, "/root"]
    try:
        with os.scandir("/home") as entries:
            homes += [e.path for e in entries if e.is_dir(follow_symlinks=False)]
    except OSError:
        pass
    return [*homes, *user_homes]


def _homes(candidates: list[str], own: str) -> list[str]:
    """The caller's home, /root and every other user's home that exists (not ``/``)."""
    above = set(_ancestors(own))  # a home of "/" or "/srv" would hide the whole host
    return [h for h in candidates if os.path.realpath(h) not in above and _is_dir(h)]


def _env_paths(names: Iterable[str]) -> list[str]:
    out: list[str] = []
    for name in names:
        for part in os.environ.get(name, "").split(os.pathsep):
            if part and os.path.isabs(part):
                out.append(part)
    return out


def _compute_secret_masks(home: str, user_homes: tuple[str, ...]) -> tuple[SecretMasks,
                                                                          list[str]]:
    """The masks and every path whose existence, type or listing decided them."""
    consulted = [home, "/home", *(os.path.dirname(p) for p in SYSTEM_SECRET_FILES)]
    credential_dirs = [os.path.join(home, d) for d in HOME_SECRET_DIRS]
    credential_dirs += _env_paths(ENV_SECRET_DIRS)
    consulted += credential_dirs
    credential_dirs = [os.path.realpath(d) for d in credential_dirs if _is_dir(d)]
    files = [os.path.join(home, f) for f in HOME_SECRET_FILES]
    files += [f for pattern in SYSTEM_SECRET_FILES for f in glob.glob(pattern)]
    files += _env_paths(ENV_SECRET_FILES)
    consulted += files
    all_files = sorted({os.path.realpath(f) for f in files if os.path.isfile(f)})
    candidates = _home_candidates(home, user_homes)
    consulted += candidates
    masked_dirs = outermost([*_homes(candidates, home), *credential_dirs])
    masked_files = tuple(f for f in all_files if not inside(f, masked_dirs))
    shown_candidates = [os.path.join(home, f) for f in HOME_SHOWN_FILES]
    consulted += shown_candidates
    shown = tuple(path for path in shown_candidates
                  if os.path.isfile(path) and not os.path.islink(path))
    masks = SecretMasks(masked_dirs, masked_files, (*credential_dirs, *all_files), shown)
    return masks, consulted


# The secret masks are planned for every sandbox; computing them (realpath, lstat of
# every candidate, the password database) cost 0.4-1.4 ms of the caller's CPU. They are
# cached per environment and reused while every path consulted and each of its
# ancestors keeps its lstat identity (device, inode, mode, mtime, ctime: creating,
# removing or renaming an entry changes its directory's), and while the password
# database gives the same homes (checked by its file's identity when it is files-only,
# else by asking it again); while an inotify watch on those directories (``fswatch``)
# reports nothing, none of that can have changed. Not cached: results resting on a
# symlink (a link elsewhere could be retargeted unseen) or on a directory changed within
# ``_RACY_NS`` of the computation (a timestamp tick could hide a second change).
_RACY_NS = 2_000_000_000
_Sig = tuple[int, int, int, int, int] | None


def _lsig(path: str) -> _Sig:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_mode, st.st_mtime_ns, st.st_ctime_ns)


# Where nss-systemd finds users besides the root and nobody it synthesizes (which are no
# regular users): Varlink services (DynamicUser=, homed, machined) and static JSON
# drop-ins (nss-systemd(8)). While none of them exists, it adds no home.
USERDB_PLACES = ("/run/systemd/userdb", "/etc/userdb", "/run/userdb", "/run/host/userdb",
                 "/usr/local/lib/userdb", "/usr/lib/userdb")


def _passwd_files_only(userdb_present: bool, nsswitch: str = "/etc/nsswitch.conf") -> bool:
    """Whether the regular users' homes come from /etc/passwd alone (then its file's
    identity, and the absence of every ``USERDB_PLACES`` entry, prove them unchanged)."""
    try:
        with open(nsswitch, encoding="utf-8") as fh:
            for line in fh:
                if line.split("#", 1)[0].strip().startswith("passwd:"):
                    sources = set(line.split("#", 1)[0].split(":", 1)[1].split())
                    others = sources - {"files", "compat"}
                    if others == {"systemd"}:
                        return not userdb_present
                    return not others
    except OSError:
        return True  # glibc's default without the file: files
    return True


@dataclass
class _CachedMasks:
    masks: SecretMasks
    deps: dict[str, _Sig]
    user_homes: tuple[str, ...] | None  # None: the database is watched through its file
    watch: DirWatch | None = None  # the directories among ``deps`` (see ``_arm``)

    def still_valid(self) -> bool:
        if self.user_homes is not None and _user_homes() != self.user_homes:
            return False
        if self.watch is not None:
            if self.watch.quiet():
                return True
            self.watch.drain()  # then proven by lstat: a change after this is an event
        return all(_lsig(path) == sig for path, sig in self.deps.items())

    def arm(self) -> bool:
        """Watch each directory among ``deps`` and, for every other dependency, the
        deepest directory above it that exists; whether nothing changed meanwhile. With
        the watch quiet, no entry of those directories was created, removed, renamed,
        written or changed in its attributes and nothing was mounted: every ``lstat``
        would be the same, so ``still_valid`` needs two system calls, not one per path."""
        dirs: set[str] = set()
        for path, sig in self.deps.items():
            if sig is None or not stat.S_ISDIR(sig[2]):
                path = os.path.dirname(path)
                while path != "/" and not _is_dir(path):
                    path = os.path.dirname(path)
            dirs.add(path)
        try:
            self.watch = DirWatch(sorted(dirs))
        except Unwatchable:
            self.watch = None
        # what changed between the lstats and the watch is seen now, or never
        return all(_lsig(path) == sig for path, sig in self.deps.items())

    def close(self) -> None:
        if self.watch is not None:
            self.watch.close()
            self.watch = None


_masks_lock = threading.Lock()
_masks_cache: dict[tuple[object, ...], _CachedMasks] = {}


def forget_cached_masks() -> None:
    """Drop the cached masks and close their watch's fds (the next sandbox plans anew):
    code counting this process's fds calls it, through ``native.drain_pool``."""
    with _masks_lock:
        for cached in _masks_cache.values():
            cached.close()
        _masks_cache.clear()


def _reset_masks_in_child() -> None:
    global _masks_lock
    _masks_lock = threading.Lock()  # a parent thread may have held it at fork time
    for cached in _masks_cache.values():  # its watches' events are the parent's to read
        cached.close()
    _masks_cache.clear()


os.register_at_fork(after_in_child=_reset_masks_in_child)


def secret_masks() -> SecretMasks:
    """The secret places that exist on this host, for the current caller (cached while
    provably unchanged, see ``_CachedMasks``)."""
    key = (os.geteuid(), os.environ.get("HOME"),
           *(os.environ.get(n) for n in (*ENV_SECRET_FILES, *ENV_SECRET_DIRS)))
    with _masks_lock:
        cached = _masks_cache.get(key)
        if cached is not None and cached.still_valid():
            return cached.masks
        gone = _masks_cache.pop(key, None)
        if gone is not None:
            gone.close()
        started = time.time_ns()
        userdb = {place: _lsig(place) for place in USERDB_PLACES}  # before deciding on them
        files_only = _passwd_files_only(any(sig is not None for sig in userdb.values()))
        passwd_sig = _lsig("/etc/passwd")
        home = _home()
        user_homes = _user_homes()
        masks, consulted = _compute_secret_masks(home, user_homes)
        deps: dict[str, _Sig] = {}
        cacheable = True
        for path in consulted:
            normal = os.path.normpath(path)
            if os.path.realpath(normal) != normal:
                cacheable = False  # a symlink on the way
                break
            for place in (normal, *_ancestors(normal)):
                if place not in deps:
                    deps[place] = _lsig(place)
        if files_only:
            deps.setdefault("/etc/passwd", passwd_sig)
            deps.setdefault("/etc/nsswitch.conf", _lsig("/etc/nsswitch.conf"))
            for place, sig in userdb.items():  # absent: one appearing invalidates
                deps.setdefault(place, sig)
        recent = started - _RACY_NS
        if cacheable and all(sig is None or (sig[3] < recent and sig[4] < recent)
                             for sig in deps.values()):
            for old in _masks_cache.values():
                old.close()
            _masks_cache.clear()  # one environment at a time is the common case
            fresh = _CachedMasks(masks, deps, None if files_only else user_homes)
            if fresh.arm():
                _masks_cache[key] = fresh
            else:
                fresh.close()
        return masks


def inside(path: str, dirs: Iterable[str]) -> bool:
    """Whether ``path`` is one of ``dirs`` or lies under one."""
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in dirs)


def dirs_to_keep(covered: Iterable[str], secrets: SecretMasks) -> tuple[str, ...]:
    """What the caller needs that a covered place would hide: the interpreter's
    prefixes, ``sys.path`` and ``PATH`` directories and the home's tool installations
    inside ``covered``; outermost first. A directory that holds (or is inside) a
    credential store is never kept."""
    return _dirs_to_keep(keep_candidates(), tuple(covered), secrets.credentials)


def keep_candidates() -> tuple[str, ...]:
    """The directories ``dirs_to_keep`` chooses from (this process's interpreter,
    ``sys.path``, ``PATH`` and the home's tool installations), sorted; made again only
    when one of those inputs changed."""
    global _candidates
    key = (tuple(sys.path), os.environ.get("PATH", ""), os.environ.get("HOME"), os.geteuid(),
           sys.prefix, sys.base_prefix, sys.exec_prefix)
    memo = _candidates
    if memo is not None and memo[0] == key:
        return memo[1]
    found = _keep_candidates()
    _candidates = (key, found)
    return found


_candidates: tuple[tuple[object, ...], tuple[str, ...]] | None = None


def _keep_candidates() -> tuple[str, ...]:
    candidates = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    candidates.update(p for p in sys.path if p and os.path.isabs(p))
    candidates.update(p for p in os.environ.get("PATH", "").split(os.pathsep)
                      if p and os.path.isabs(p))
    home = _home()
    candidates.update(os.path.join(home, d) for d in HOME_TOOL_DIRS)
    return tuple(sorted(candidates))


@functools.lru_cache(maxsize=16)
def _dirs_to_keep(candidates: tuple[str, ...], covered: tuple[str, ...],
                  credentials: tuple[str, ...]) -> tuple[str, ...]:
    """Cached: about 70 realpath calls, the same for every sandbox of a process (a kept
    directory removed since is skipped by the sandbox's init)."""
    keep: list[str] = []
    for raw in candidates:
        path = os.path.realpath(raw)
        if not _is_dir(path) or path in covered:
            continue
        if not inside(path, covered) or inside(path, credentials):
            continue
        if any(inside(s, [path]) for s in credentials):
            continue  # keeping it would re-expose a credential
        keep.append(path)
    return outermost(keep)


def outermost(paths: Iterable[str], real: Iterable[str] = ()) -> tuple[str, ...]:
    """Real, absolute, de-nested paths (a path inside another is dropped); ``/`` is
    refused: hiding it would hide the whole host. ``real``: more paths that are real
    already (an earlier ``outermost``'s result, so not resolved again)."""
    real = sorted(({os.path.realpath(p) for p in paths} | set(real)) - {"/"})
    kept: list[str] = []
    for path in real:
        if not any(path.startswith(k.rstrip("/") + "/") for k in kept):
            kept.append(path)
    return tuple(kept)


__all__ = [
    "SecretMasks",
    "dirs_to_keep",
    "forget_cached_masks",
    "inside",
    "keep_candidates",
    "outermost",
    "secret_masks",
    "store_dirs",
]
