"""What a command sandbox's pid-1 init does once isolation is complete.

The Python path of a command (``FORKDECK_NATIVE=0``, or no native executor); the native
executor's init (``native/forkdeck_sandbox.c``) does the same in C. The caller sets
``PWD`` in ``env`` for both.
"""

from __future__ import annotations

import os
import signal
import struct

from branching_core.sandbox import _spawn, _syscalls
from branching_core.sandbox.namespaces import SandboxPlan


def command_main(argv: list[str], env: dict[str, str]) -> _spawn.ChildMain:
    """The init's body: spawn ``argv``, reap every orphan, report the command's status."""

    def main(plan: SandboxPlan, result_fd: int) -> int:
        try:
            child = os.posix_spawnp(
                argv[0], argv, env,
                setsigdef=(signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT),
            )
        except OSError as exc:
            msg = f"{argv[0]}: {exc.strerror}\n".encode()
            os.write(2, msg)
            status = (127 if exc.errno == 2 else 126) << 8
        else:
            # The command's fds are its own: their EOF must not wait for our exit.
            os.closerange(0, result_fd)
            os.closerange(result_fd + 1, 1 << 20)
            while True:  # pid 1 duty: reap every orphan until the command itself ends
                try:
                    pid, status = os.waitpid(-1, 0)
                except ChildProcessError:
                    status = 0
                    break
                if pid == child:
                    break
            # Then end the rest of the pid namespace (kill(-1) reaches only its members)
            # and reap it: the exit record promises nothing of the command still runs.
            _syscalls.end_pid_namespace()
        _spawn.write_record(result_fd, _spawn.TAG_EXIT, struct.pack("<i", status))
        return 0

    return main


__all__ = ["command_main"]
