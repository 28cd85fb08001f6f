"""Fault injection at named steps of a commit, for the crash-safety tests.

Set ``FORKDECK_CRASH_AT`` to a step name (``staged``, ``journaled``, ``op:<i>``,
``applied``, ``finishing``, ``undo:<i>``; for batches ``branch_many:made``,
``discard:unmounted``, ``discard:moved:<i>``; ``dropping-generation`` once a closing
branch that had children committed into it is thrown away) and, optionally, ``FORKDECK_CRASH_WITH``.
"""

from __future__ import annotations

import errno
import os
import signal

CRASH_ENV = "FORKDECK_CRASH_AT"
CRASH_WITH_ENV = "FORKDECK_CRASH_WITH"
_INJECTED = {
    "interrupt": lambda: KeyboardInterrupt(),
    "eio": lambda: OSError(errno.EIO, os.strerror(errno.EIO)),
    "enospc": lambda: OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)),
    "eacces": lambda: PermissionError(errno.EACCES, os.strerror(errno.EACCES)),
}
_fired: set[str] = set()


def crash_point(name: str) -> None:
    """Fault injection for the crash-safety tests: fail at a named step of a commit.

    ``FORKDECK_CRASH_AT=op:3`` acts right after the fourth operation of a commit is
    applied; ``journaled`` right after the journal is durable, and so on. By default the
    process SIGKILLs itself; ``FORKDECK_CRASH_WITH=interrupt|eio|enospc|eacces`` raises
    ``KeyboardInterrupt`` or that ``OSError`` instead, once per process (as a real
    interruption or a failing disk would). Costs one environment lookup when unset.
    """
    if os.environ.get(CRASH_ENV) != name:
        return
    mode = os.environ.get(CRASH_WITH_ENV, "kill")
    if mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
        return
    if name in _fired:
        return
    _fired.add(name)
    raise _INJECTED[mode]()


def reset_injected_faults() -> None:
    """Let every injected fault fire again (tests running many commits in one process)."""
    _fired.clear()


__all__ = ["CRASH_ENV", "CRASH_WITH_ENV", "crash_point", "reset_injected_faults"]
