"""The workspace toolset: file and shell tools for a pydantic-ai agent, bound to one directory.

Each fork branch gets its own toolset bound to its own branch view, so the agent's file
edits and its shell commands act on the same copy-on-write tree.

Error policy (one rule for every tool): a call that cannot be done -- a path outside the
root, a missing file, an ambiguous edit, a bad regex, a sandbox that cannot start -- raises
:class:`pydantic_ai.ToolFailed`. The model receives the message as a failed tool result
(``outcome='failed'``) and can adapt; unlike ``ModelRetry`` it does not consume the tool's
retry budget, so a model that tries a forbidden path twice does not crash the whole run,
and the coordinator can count refusals from the history. A command that runs and exits
non-zero is *not* a failure of the tool: its exit code is part of the normal result.

The ``glob`` and ``grep`` tools (and the bounded reading they share with ``read_file``)
are in :mod:`branching_core.agent.toolset_search`, mixed in here.

Tool results are short plain text meant for a model: no JSON, bounded size, the middle of
anything huge cut out with a marker that says so.

Bounded and safe by construction: ``glob`` and ``grep`` stop at ``search_timeout`` and
never hold the GIL while matching (:mod:`branching_core.agent.search`); reads refuse
FIFOs and devices without blocking; writes replace files atomically
(:mod:`branching_core.atomicio`); and :func:`~branching_core.agent.tool_guard.guard_tool`
turns any exception no check foresaw into a ``ToolFailed`` as well.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic_ai.toolsets import FunctionToolset

from branching_core.agent.commands import (
    CommandRunner,
    OutputCallback,
    SandboxCommandRunner,
    truncate_middle,
)
from branching_core.agent.paths import (
    HIDDEN_NAMES,
    UnsafePathError,
    resolve_in_root,
    shown_path,
)
from branching_core.agent.search import DEFAULT_SEARCH_TIMEOUT_S, glob_to_regex
from branching_core.agent.tool_guard import guard_tool
from branching_core.agent.toolset_search import (
    MAX_GREP_FILE_BYTES,
    MAX_LISTED,
    SearchTools,
    _fail,
    _file_kind,
    _is_binary,
    _read_fd,
)
from branching_core.atomicio import atomic_write
from branching_core.errors import PathNotDirectoryError, error_name

MAX_READ_BYTES = 10 * 1024 * 1024
DEFAULT_READ_LINES = 2000

INSTRUCTIONS = (
    "You work in a workspace directory. File tools take paths relative to its root; "
    "absolute paths, '..' above the root and symlinks leading outside are refused. "
    "run_command runs a shell command with the workspace root as its working directory."
)


class WorkspaceToolset(SearchTools, FunctionToolset[Any]):
    """A :class:`FunctionToolset` whose tools act on files under ``root`` only.

    ``root`` may be any directory path, including a ``/proc/<pid>/root/...`` view; it is
    never resolved and never becomes the current directory (a relative root is made
    absolute once, here). ``command_runner`` defaults to the sandbox runner;
    ``on_output`` receives each output line of ``run_command`` as it is produced;
    ``search_timeout`` bounds one ``glob`` or ``grep`` call (seconds).
    """

    def __init__(
        self,
        root: Path | str,
        *,
        command_runner: CommandRunner | None = None,
        command_timeout: float = 60.0,
        max_command_timeout: float | None = None,
        on_output: OutputCallback | None = None,
        max_output_chars: int = 20_000,
        search_timeout: float = DEFAULT_SEARCH_TIMEOUT_S,
        id: str | None = None,
        on_replace: Callable[[str], None] | None = None,
    ) -> None:
        root_path = Path(os.path.abspath(os.fspath(root)))
        if not root_path.is_dir():
            raise PathNotDirectoryError(f"workspace root is not a directory: {root_path}")
        super().__init__(id=id, instructions=INSTRUCTIONS, docstring_format="google")
        self.root = root_path
        self.command_runner: CommandRunner = command_runner or SandboxCommandRunner()
        self.command_timeout = command_timeout
        self.max_command_timeout = max_command_timeout or max(command_timeout, 600.0)
        self.on_output = on_output
        self.max_output_chars = max_output_chars
        self.search_timeout = search_timeout
        # Told the root-relative path of an existing file just before it is replaced by
        # rename (``Branch.note_replacing``): an overlay branch cannot see afterwards that
        # the path existed, and would call the rewrite a creation.
        self.on_replace = on_replace
        # One call per tool (not a loop over a tuple) so each signature is checked on its own.
        self.add_function(self.read_file, takes_ctx=False)
        self.add_function(self.list_dir, takes_ctx=False)
        self.add_function(self.glob, takes_ctx=False)
        self.add_function(self.grep, takes_ctx=False)
        # Tools with side effects are barriers: when a model emits several calls in one
        # response, they run alone and in the order they were emitted.
        self.add_function(self.write_file, takes_ctx=False, sequential=True)
        self.add_function(self.edit_file, takes_ctx=False, sequential=True)
        self.add_function(self.delete_file, takes_ctx=False, sequential=True)
        self.add_function(self.run_command, takes_ctx=False, sequential=True)

    # -- path handling -------------------------------------------------------------------

    def resolve(self, path: str, *, follow_final: bool = True) -> Path:
        """Resolve a model-supplied path; refusals become tool failures the model reads."""
        try:
            return resolve_in_root(self.root, path, follow_final=follow_final)
        except UnsafePathError as exc:
            raise _fail(f"refused: {exc}") from None

    def _read_bytes(self, path: str) -> tuple[Path, bytes]:
        """Read a regular file; anything else (a FIFO, a device, a socket) is refused.

        The file is opened with ``O_NONBLOCK`` (a FIFO with no writer would otherwise block
        the open forever) and checked with ``fstat`` on the opened descriptor, so a file
        swapped for a FIFO between a check and the open cannot hang the tool.
        """
        target = self.resolve(path)
        shown = shown_path(path)
        try:
            fd = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            raise _fail(f"{shown} does not exist") from None
        except OSError as exc:
            if os.path.isdir(target):
                raise _fail(f"{shown} is a directory; use list_dir") from None
            raise _fail(f"cannot read {shown}: {exc.strerror or exc}") from None
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise _fail(f"{shown} is a directory; use list_dir")
            if not stat.S_ISREG(st.st_mode):
                raise _fail(
                    f"{shown} is not a regular file ({_file_kind(st.st_mode)}); "
                    "read_file reads regular files only"
                )
            if st.st_size > MAX_READ_BYTES:
                raise _fail(
                    f"{shown} is too large to read ({st.st_size} bytes); use grep, or "
                    "run_command with head/sed"
                )
            return target, _read_fd(fd, MAX_READ_BYTES)
        except OSError as exc:
            raise _fail(f"cannot read {shown}: {exc.strerror or exc}") from None
        finally:
            os.close(fd)

    def _write_bytes(self, target: Path, data: bytes, shown: str) -> None:
        """Replace ``target`` atomically (temp file + rename, the old file's mode kept): a
        kill mid-write leaves the old content or the new, never an empty file."""
        try:
            st = os.lstat(target)
        except (FileNotFoundError, NotADirectoryError):
            st = None
        except OSError as exc:
            raise _fail(f"cannot write {shown}: {exc.strerror or exc}") from None
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise _fail(f"{shown} is a directory")
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise _fail(
                f"cannot write {shown}: it is not a regular file ({_file_kind(st.st_mode)})"
            )
        if st is not None and self.on_replace is not None:
            self.on_replace(self._rel(target))
        try:
            if target.parent != target:
                os.makedirs(target.parent, exist_ok=True)
            atomic_write(target, data)
        except (FileExistsError, NotADirectoryError):
            raise _fail(f"cannot write {shown}: a parent path is a file") from None
        except OSError as exc:
            raise _fail(f"cannot write {shown}: {exc.strerror or exc}") from None

    # -- tools ---------------------------------------------------------------------------

    @guard_tool
    def read_file(self, path: str, offset: int = 0, limit: int = DEFAULT_READ_LINES) -> str:
        """Read a text file from the workspace.

        Args:
            path: File path relative to the workspace root.
            offset: Number of lines to skip from the start.
            limit: Maximum number of lines to return.
        """
        _, data = self._read_bytes(path)
        if _is_binary(data):
            raise _fail(f"{path} is a binary file ({len(data)} bytes)")
        if not data:
            return f"({path} is empty)"
        lines = data.decode("utf-8", errors="replace").splitlines(keepends=True)
        offset, limit = max(offset, 0), max(limit, 1)
        chunk = "".join(lines[offset : offset + limit])
        chunk = truncate_middle(chunk, self.max_output_chars)
        end = min(offset + limit, len(lines))
        if offset == 0 and end == len(lines):
            return chunk
        if offset >= len(lines):
            return f"({path} has only {len(lines)} lines)"
        note = f"[lines {offset + 1}-{end} of {len(lines)}"
        if end < len(lines):
            note += f"; call read_file with offset={end} for more"
        return f"{chunk.rstrip(chr(10))}\n{note}]"

    @guard_tool
    def write_file(self, path: str, content: str) -> str:
        """Create or overwrite a file with the given content; parent directories are created.

        Args:
            path: File path relative to the workspace root.
            content: The complete new content of the file.
        """
        target = self.resolve(path)
        existed = os.path.lexists(target)
        data = content.encode("utf-8")
        self._write_bytes(target, data, path)
        verb = "overwrote" if existed else "created"
        return f"{verb} {self._rel(target)} ({len(data)} bytes)"

    @guard_tool
    def edit_file(self, path: str, old: str, new: str, replace_all: bool = False) -> str:
        """Replace an exact piece of text in a file.

        Args:
            path: File path relative to the workspace root.
            old: The exact text to replace; it must occur exactly once unless replace_all is true.
            new: The replacement text.
            replace_all: Replace every occurrence instead of requiring a unique one.
        """
        if not old:
            raise _fail("old must not be empty; use write_file to create or replace a whole file")
        if old == new:
            raise _fail("old and new are identical; nothing to change")
        target, data = self._read_bytes(path)
        if _is_binary(data):
            raise _fail(f"{path} is a binary file; edit_file works on text only")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise _fail(f"{path} is not valid UTF-8; edit it with run_command") from None
        count = text.count(old)
        if count == 0:
            raise _fail(f"the old text was not found in {path}; read the file and copy it exactly")
        if count > 1 and not replace_all:
            raise _fail(
                f"the old text occurs {count} times in {path}; include more context to make it "
                "unique, or pass replace_all=true"
            )
        self._write_bytes(target, text.replace(old, new).encode("utf-8"), path)
        return f"edited {self._rel(target)}: replaced {count} occurrence{'s' if count > 1 else ''}"

    @guard_tool
    def list_dir(self, path: str = ".") -> str:
        """List a directory: subdirectories end with '/', symlinks show their target.

        Args:
            path: Directory path relative to the workspace root.
        """
        target = self.resolve(path)
        try:
            with os.scandir(target) as it:
                entries = sorted(
                    (e for e in it if e.name not in HIDDEN_NAMES), key=lambda e: e.name
                )
        except FileNotFoundError:
            raise _fail(f"{path} does not exist") from None
        except NotADirectoryError:
            raise _fail(f"{path} is a file, not a directory") from None
        except OSError as exc:
            raise _fail(f"cannot list {path}: {exc.strerror or exc}") from None
        if not entries:
            return f"({self._rel(target)} is empty)"
        lines: list[str] = []
        for entry in entries[:MAX_LISTED]:
            try:
                if entry.is_symlink():
                    lines.append(f"{entry.name} -> {os.readlink(entry.path)}")
                elif entry.is_dir(follow_symlinks=False):
                    lines.append(f"{entry.name}/")
                else:
                    size = entry.stat(follow_symlinks=False).st_size
                    lines.append(f"{entry.name}  ({size} bytes)")
            except OSError:
                lines.append(f"{entry.name}  (unreadable)")
        if len(entries) > MAX_LISTED:
            lines.append(f"... and {len(entries) - MAX_LISTED} more entries")
        return "\n".join(lines)

    @guard_tool
    def delete_file(self, path: str) -> str:
        """Delete a file (or a symlink itself, never its target).

        Args:
            path: File path relative to the workspace root.
        """
        target = self.resolve(path, follow_final=False)
        if target == self.root:
            raise _fail("refused: cannot delete the workspace root")
        try:
            st = os.lstat(target)
            if stat.S_ISDIR(st.st_mode):
                raise _fail(f"{path} is a directory; delete_file removes files only")
            os.unlink(target)
        except FileNotFoundError:
            raise _fail(f"{path} does not exist") from None
        except OSError as exc:
            raise _fail(f"cannot delete {path}: {exc.strerror or exc}") from None
        return f"deleted {self._rel(target)}"

    @guard_tool
    async def run_command(self, command: str, timeout: float | None = None) -> str:
        """Run a shell command in the workspace root (in the branch sandbox) and return its output.

        Args:
            command: The shell command line, run with /bin/sh.
            timeout: Seconds before the command is killed; defaults to the workspace setting.
        """
        if not command.strip():
            raise _fail("the command is empty")
        limit = self.command_timeout if timeout is None or timeout <= 0 else timeout
        limit = min(limit, self.max_command_timeout)
        try:
            outcome = await self.command_runner(
                command, cwd=self.root, timeout=limit, on_output=self.on_output
            )
        except ImportError as exc:
            raise _fail(
                f"the sandbox is not available here ({exc}); the command did not run"
            ) from None
        except Exception as exc:  # the runner could not start the command at all
            raise _fail(f"the command could not be started: {error_name(exc)}: {exc}") from None
        if outcome.timed_out:
            head = f"timed out after {limit:g}s; the command was killed"
        elif outcome.oom_killed:
            head = f"killed: out of memory (exit code {outcome.exit_code})"
        else:
            head = f"exit code {outcome.exit_code}"
        parts = [head]
        budget = self.max_output_chars
        if outcome.stdout:
            parts.append("stdout:\n" + truncate_middle(outcome.stdout, budget).rstrip("\n"))
        if outcome.stderr:
            parts.append("stderr:\n" + truncate_middle(outcome.stderr, budget // 2).rstrip("\n"))
        if not outcome.stdout and not outcome.stderr:
            parts.append("(no output)")
        return "\n".join(parts)


def create_workspace_toolset(
    root: Path | str,
    *,
    command_runner: CommandRunner | None = None,
    command_timeout: float = 60.0,
    on_output: OutputCallback | None = None,
    id: str | None = None,
    on_replace: Callable[[str], None] | None = None,
) -> WorkspaceToolset:
    """Build the workspace toolset for one branch directory (see :class:`WorkspaceToolset`)."""
    return WorkspaceToolset(
        root,
        command_runner=command_runner,
        command_timeout=command_timeout,
        on_output=on_output,
        id=id,
        on_replace=on_replace,
    )


__all__ = [
    "INSTRUCTIONS",
    "MAX_GREP_FILE_BYTES",
    "WorkspaceToolset",
    "create_workspace_toolset",
    "glob_to_regex",
]
