"""Run a command on a pseudo-terminal inside the sandbox and relay it: ``ptyhost.py``.

Why a pty: agent CLIs change behaviour when they are not on a terminal (no colours, no
progress, some refuse to start, some block reading a piped stdin until EOF). The sandbox
captures pipes, so this small program, started *inside* the sandbox as the sandbox's
command, opens a pty, runs the agent as the session leader on its slave side, copies
everything the agent writes to its own stdout (the sandbox's captured pipe, colours
kept) and copies bytes arriving on the steer fd (default 3: a pipe the caller writes
``>>label text`` steers into) to the agent's terminal, as if typed.

Usage: ``python -I ptyhost.py [--cols N] [--rows N] [--steer-fd FD] -- ARGV...``. The
exit status is the agent's (128+signal when it was killed by one). Standard library
only, and no import of forkdeck: it runs with ``-I`` from its file.
"""

from __future__ import annotations

import errno
import fcntl
import os
import pty
import select
import signal
import struct
import sys
import termios


def _set_size(fd: int, rows: int, cols: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def _parse(argv: list[str]) -> tuple[int, int, int, list[str]]:
    cols, rows, steer = 120, 40, 3
    if "--" not in argv:
        raise SystemExit("ptyhost: usage: ptyhost.py [--cols N] [--rows N] [--steer-fd FD] -- ARGV")
    cut = argv.index("--")
    opts, command = argv[:cut], argv[cut + 1:]
    it = iter(opts)
    for opt in it:
        value = int(next(it))
        if opt == "--cols":
            cols = value
        elif opt == "--rows":
            rows = value
        elif opt == "--steer-fd":
            steer = value
        else:
            raise SystemExit(f"ptyhost: unknown option {opt}")
    if not command:
        raise SystemExit("ptyhost: no command")
    return cols, rows, steer, command


def _write_all(fd: int, data: bytes) -> None:
    while data:
        try:
            n = os.write(fd, data)
        except InterruptedError:
            continue
        data = data[n:]


def main(argv: list[str]) -> int:
    cols, rows, steer_fd, command = _parse(argv)
    try:
        os.fstat(steer_fd)
    except OSError:
        steer_fd = -1
    master, slave = pty.openpty()
    _set_size(slave, rows, cols)
    pid = os.fork()
    if pid == 0:  # the agent: session leader with the pty as its controlling terminal
        try:
            os.close(master)
            if steer_fd >= 0:
                os.close(steer_fd)
            os.setsid()
            fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
            for fd in (0, 1, 2):
                os.dup2(slave, fd)
            if slave > 2:
                os.close(slave)
            os.environ.setdefault("TERM", "xterm-256color")
            os.environ["COLUMNS"], os.environ["LINES"] = str(cols), str(rows)
            os.execvp(command[0], command)
        except OSError as exc:
            os.write(2, f"ptyhost: cannot run {command[0]}: {exc.strerror}\n".encode())
        os._exit(127)
    os.close(slave)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: os.kill(pid, s))
    readers = [master] + ([steer_fd] if steer_fd >= 0 else [])
    status: int | None = None
    while master in readers:
        try:
            ready, _, _ = select.select(readers, [], [], 0.2 if status is None else 0.05)
        except InterruptedError:
            continue
        if not ready and status is not None:
            break  # the agent is gone and its terminal has gone quiet (a background child
            # may still hold it open: the sandbox kills what is left)
        if steer_fd in ready:
            data = os.read(steer_fd, 65536)
            if data:
                _write_all(master, data)
            else:  # the caller closed the steer pipe: nothing more will be typed
                readers.remove(steer_fd)
        if master in ready:
            try:
                data = os.read(master, 65536)
            except OSError as exc:  # EIO: every slave end is closed (the agent is gone)
                if exc.errno != errno.EIO:
                    raise
                data = b""
            if not data:
                readers.remove(master)
            else:
                _write_all(1, data)
        if status is None:
            done, wait_status = os.waitpid(pid, os.WNOHANG)
            if done:
                status = wait_status
    if status is None:
        _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
