"""Find the user's diff tool and open a fork's parent snapshot against its branches.

Detection order (:meth:`EditorDetector.detect`), first match wins:

1. ``PYDANTIC_DEEP_DIFFTOOL``, then ``FORKDECK_DIFFTOOL``: a command template -> ``custom``
   (the words ``pycharm``, ``vscode``/``code`` or ``tui`` pick that kind instead);
2. the ``review.difftool`` setting passed in by the caller, read the same way
   (environment first, so a one-off ``FORKDECK_DIFFTOOL=... forkdeck`` beats the file);
3. a PyCharm launcher on ``PATH`` (``pycharm``, ``pycharm-professional``,
   ``pycharm-community``, ``charm``) -> ``pycharm``;
4. ``code`` (or ``codium``) on ``PATH`` -> ``vscode``;
5. otherwise ``tui``: no process, the caller opens its own diff viewer.

Custom templates. The template is split with :func:`shlex.split` *first*; placeholders are
then substituted inside each resulting argument, and the argv list is run without a shell.
So a branch file called ``$(rm -rf x)`` or ``a; rm -rf x`` is one argument, never code:

* ``{parent}``: the parent snapshot (an argument mentioning it is dropped when there is
  no parent, e.g. for a file the fork created);
* ``{branches}``: every branch path, each as its own argument (``--right={branches}``
  repeats the argument once per branch);
* ``{branch}``: one branch path; the command is run once per branch (pairwise tools such
  as ``meld {parent} {branch}``).

A template with no placeholder gets `` {parent} {branches}`` appended. Other braces are
left alone (no ``str.format``). A placeholder may not be the program itself, and may not
sit inside the script of ``sh -c`` and friends (that would hand a file name to a shell):
write ``sh -c 'tool "$@"' sh {parent} {branches}`` instead.

PyCharm (``pycharm diff <path1> <path2> [<path3>]``, at most three paths). Its 3-way viewer
shows the *third* argument in the middle pane as the base: IntelliJ's ``DiffApplication``
calls ``createFromFiles(project, files[0], files[2], files[1])`` whose parameters are
``(left, base, right)`` (unchanged from the 2015 Java version to the 2025 Kotlin one).
So "parent in the middle" for two branches ``a``, ``b`` is ``pycharm diff a b parent``.
More than two branches: one 3-way window per consecutive pair (``a b parent``,
``c d parent``, ...), an odd last branch gets a 2-way ``parent x``. Directories: the
JetBrains directory viewer is 2-way only (``DirDiffViewer.canShowRequest`` requires two
contents), so each branch directory gets its own ``pycharm diff parent branch``.

VS Code (``code --diff <file> <file>``) is 2-way, one process per branch. It cannot diff
directories (microsoft/vscode#10350 and #98197, closed without a folder compare), so for
directories each file that differs gets its own ``code --diff parent/f branch/f``, a file
only the branch has is opened plainly (``code branch/f``), a file the branch deleted is
left to the TUI viewer, and more than :data:`MAX_VSCODE_FILE_DIFFS` such commands raise
:class:`EditorLaunchError` (the caller should fall back to the TUI rather than open a
hundred tabs).

Launched processes get ``/dev/null`` for stdin/stdout/stderr (the TUI owns the terminal)
and a new session (Ctrl-C in forkdeck does not close the user's IDE).
"""

from __future__ import annotations

import filecmp
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from branching_core.errors import BranchingError

EditorKind = Literal["custom", "pycharm", "vscode", "tui"]

ENV_VARS = ("PYDANTIC_DEEP_DIFFTOOL", "FORKDECK_DIFFTOOL")
PYCHARM_LAUNCHERS = ("pycharm", "pycharm-professional", "pycharm-community", "charm")
VSCODE_LAUNCHERS = ("code", "codium")
MAX_VSCODE_FILE_DIFFS = 20

_KEYWORDS: dict[str, EditorKind] = {
    "pycharm": "pycharm",
    "vscode": "vscode",
    "code": "vscode",
    "tui": "tui",
}
_PLACEHOLDER_RE = re.compile(r"\{(parent|branches|branch)\}")
_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "fish", "busybox"})

Which = Callable[[str], str | None]


class EditorLaunchError(BranchingError):
    """The diff tool cannot be launched for these paths; the message says why (one line)."""


def _template_kind(value: str | None) -> tuple[EditorKind, str | None] | None:
    """Read one override value: a keyword picks a kind, other text is a custom template."""
    if value is None or not value.strip():
        return None
    keyword = _KEYWORDS.get(value.strip().lower())
    if keyword is not None:
        return keyword, None
    return "custom", value


class EditorDetector:
    """Stateless: detection and invocation are static methods (see the module docstring)."""

    @staticmethod
    def override(
        env: Mapping[str, str] | None = None, *, difftool: str | None = None
    ) -> tuple[EditorKind, str | None] | None:
        """The explicit choice, if any: ``(kind, template)`` from the environment variables,
        else from the ``difftool`` setting; ``template`` is set only for ``custom``."""
        environ = os.environ if env is None else env
        for name in ENV_VARS:
            found = _template_kind(environ.get(name))
            if found is not None:
                return found
        return _template_kind(difftool)

    @staticmethod
    def template(
        env: Mapping[str, str] | None = None, *, difftool: str | None = None
    ) -> str | None:
        """The custom command template in force, or None when the choice is not custom."""
        found = EditorDetector.override(env, difftool=difftool)
        return found[1] if found is not None else None

    @staticmethod
    def detect(
        env: Mapping[str, str] | None = None,
        *,
        which: Which = shutil.which,
        difftool: str | None = None,
    ) -> EditorKind:
        """The kind of diff tool to use, from the environment, the setting and ``PATH``."""
        found = EditorDetector.override(env, difftool=difftool)
        if found is not None:
            return found[0]
        if EditorDetector.launcher("pycharm", which=which) is not None:
            return "pycharm"
        if EditorDetector.launcher("vscode", which=which) is not None:
            return "vscode"
        return "tui"

    @staticmethod
    def launcher(kind: EditorKind, *, which: Which = shutil.which) -> str | None:
        """The full path of the first launcher for ``kind`` on ``PATH`` (pycharm, vscode)."""
        names = {"pycharm": PYCHARM_LAUNCHERS, "vscode": VSCODE_LAUNCHERS}.get(kind, ())
        for name in names:
            found = which(name)
            if found:
                return found
        return None

    @staticmethod
    def build_commands(
        kind: EditorKind,
        parent: Path | None,
        branch_paths: Sequence[Path],
        *,
        custom_cmd: str | None = None,
        executable: str | None = None,
    ) -> list[list[str]]:
        """The argv lists :meth:`invoke` would run; pure apart from reading directories.

        Paths are made absolute, so none can start with ``-`` and pass for an option.
        ``executable`` replaces the launcher name (``pycharm``/``code``) in the result.
        Raises :class:`EditorLaunchError` when there is nothing sensible to run.
        """
        if kind == "tui":
            return []
        branches = [_abs(p) for p in branch_paths]
        if not branches:
            raise EditorLaunchError("no branch paths to compare")
        base = _abs(parent) if parent is not None else None
        if kind == "custom":
            if custom_cmd is None or not custom_cmd.strip():
                raise EditorLaunchError(
                    "custom difftool has no command template (set FORKDECK_DIFFTOOL)"
                )
            return _custom_commands(custom_cmd, base, branches)
        if kind == "pycharm":
            return _pycharm_commands(executable or "pycharm", base, branches)
        if kind == "vscode":
            return _vscode_commands(executable or "code", base, branches)
        raise EditorLaunchError(f"unknown editor kind {kind!r}")

    @staticmethod
    def invoke(
        kind: EditorKind,
        parent: Path | None,
        branch_paths: Sequence[Path],
        *,
        custom_cmd: str | None = None,
        env: Mapping[str, str] | None = None,
        which: Which = shutil.which,
        difftool: str | None = None,
    ) -> list[subprocess.Popen[bytes]]:
        """Launch the diff tool; returns the started processes (empty for ``tui``).

        For ``custom`` without ``custom_cmd`` the template comes from ``env`` (default
        ``os.environ``) or ``difftool``. The processes are not waited for.
        """
        if kind == "tui":
            return []
        executable: str | None = None
        if kind == "custom" and custom_cmd is None:
            custom_cmd = EditorDetector.template(env, difftool=difftool)
        elif kind in ("pycharm", "vscode"):
            executable = EditorDetector.launcher(kind, which=which)
            if executable is None:
                names = PYCHARM_LAUNCHERS if kind == "pycharm" else VSCODE_LAUNCHERS
                raise EditorLaunchError(f"{kind}: none of {', '.join(names)} is on PATH")
        commands = EditorDetector.build_commands(
            kind, parent, branch_paths, custom_cmd=custom_cmd, executable=executable
        )
        processes: list[subprocess.Popen[bytes]] = []
        for argv in commands:
            try:
                processes.append(
                    subprocess.Popen(
                        argv,
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        start_new_session=True,
                    )
                )
            except OSError as exc:
                raise EditorLaunchError(
                    f"cannot start {argv[0]!r}: {exc.strerror or exc}"
                ) from None
        return processes


def _abs(path: Path | str) -> str:
    return os.path.abspath(os.fspath(path))


# --------------------------------------------------------------------------- custom


def _custom_commands(template: str, parent: str | None, branches: list[str]) -> list[list[str]]:
    try:
        tokens = shlex.split(template)
    except ValueError as exc:
        raise EditorLaunchError(f"difftool template {template!r}: {exc}") from None
    if not tokens:
        raise EditorLaunchError("difftool template is empty")
    if _PLACEHOLDER_RE.search(tokens[0]):
        raise EditorLaunchError(
            f"difftool template {template!r}: the program itself cannot be a placeholder"
        )
    _refuse_shell_script_placeholders(template, tokens)
    if not any(_PLACEHOLDER_RE.search(token) for token in tokens):
        tokens = [*tokens, "{parent}", "{branches}"]
    if any("{branch}" in token for token in tokens):
        return [_expand(tokens, parent, branches, branch) for branch in branches]
    return [_expand(tokens, parent, branches, None)]


def _refuse_shell_script_placeholders(template: str, tokens: list[str]) -> None:
    """``sh -c "diff {parent} ..."`` would let a file name run as shell code: refuse it."""
    if os.path.basename(tokens[0]) not in _SHELLS:
        return
    for index, token in enumerate(tokens[1:-1], start=1):
        is_c_flag = token.startswith("-") and not token.startswith("--") and "c" in token
        if is_c_flag and _PLACEHOLDER_RE.search(tokens[index + 1]):
            raise EditorLaunchError(
                f"difftool template {template!r}: placeholders inside a shell -c script are "
                "unsafe; pass them as arguments (sh -c '... \"$@\"' sh {parent} {branches})"
            )


def _substitute(token: str, values: Mapping[str, str]) -> str:
    """One pass, so a path that itself contains ``{branches}`` is never substituted again."""
    return _PLACEHOLDER_RE.sub(lambda m: values[m.group(1)], token)


def _expand(
    tokens: list[str], parent: str | None, branches: list[str], branch: str | None
) -> list[str]:
    argv: list[str] = []
    for token in tokens:
        names = set(_PLACEHOLDER_RE.findall(token))
        if not names:
            argv.append(token)
            continue
        if "parent" in names and parent is None:
            continue  # no parent snapshot: the argument that names it is left out
        values = {"parent": parent or "", "branch": branch or ""}
        if "branches" in names:
            argv.extend(_substitute(token, {**values, "branches": b}) for b in branches)
        else:
            argv.append(_substitute(token, {**values, "branches": ""}))
    return argv


# --------------------------------------------------------------------------- pycharm


def _pycharm_commands(exe: str, parent: str | None, branches: list[str]) -> list[list[str]]:
    if _any_dir(parent, branches):
        _same_kind(parent, branches)
        # The JetBrains directory viewer compares exactly two directories.
        return _pairwise([exe, "diff"], parent, branches)
    if parent is None:
        return _pairwise([exe, "diff"], None, branches)
    if len(branches) == 1:
        return [[exe, "diff", parent, branches[0]]]
    commands: list[list[str]] = []
    for start in range(0, len(branches), 2):
        pair = branches[start : start + 2]
        if len(pair) == 2:
            # Third argument = base = middle pane (see the module docstring).
            commands.append([exe, "diff", pair[0], pair[1], parent])
        else:
            commands.append([exe, "diff", parent, pair[0]])
    return commands


def _pairwise(prefix: list[str], parent: str | None, branches: list[str]) -> list[list[str]]:
    """Each branch against the parent, or against the first branch when there is none."""
    if parent is not None:
        return [[*prefix, parent, branch] for branch in branches]
    if len(branches) < 2:
        raise EditorLaunchError("nothing to compare: one branch path and no parent")
    return [[*prefix, branches[0], other] for other in branches[1:]]


def _any_dir(parent: str | None, branches: list[str]) -> bool:
    return any(os.path.isdir(p) for p in ([parent] if parent else []) + branches)


def _same_kind(parent: str | None, branches: list[str]) -> None:
    paths = ([parent] if parent else []) + branches
    existing = [p for p in paths if os.path.lexists(p)]
    if any(os.path.isdir(p) for p in existing) and not all(os.path.isdir(p) for p in existing):
        raise EditorLaunchError("cannot compare a directory with a file")


# --------------------------------------------------------------------------- vscode


def _vscode_commands(exe: str, parent: str | None, branches: list[str]) -> list[list[str]]:
    if not _any_dir(parent, branches):
        return _pairwise([exe, "--diff"], parent, branches)
    _same_kind(parent, branches)
    commands: list[list[str]] = []
    for left, right in (pair[2:] for pair in _pairwise(["", ""], parent, branches)):
        commands.extend(_vscode_dir_pair(exe, left, right))
        if len(commands) > MAX_VSCODE_FILE_DIFFS:
            raise EditorLaunchError(
                f"VS Code cannot diff directories and more than {MAX_VSCODE_FILE_DIFFS} files "
                "differ; use the TUI viewer or set FORKDECK_DIFFTOOL to a directory diff tool"
            )
    return commands


def _vscode_dir_pair(exe: str, left: str, right: str) -> list[list[str]]:
    """One ``--diff`` per differing file of two directories; branch-only files opened."""
    left_files = _files_under(left)
    right_files = _files_under(right)
    commands: list[list[str]] = []
    for rel in sorted(left_files | right_files):
        a, b = os.path.join(left, rel), os.path.join(right, rel)
        if rel in left_files and rel in right_files:
            if not filecmp.cmp(a, b, shallow=False):
                commands.append([exe, "--diff", a, b])
        elif rel in right_files:
            commands.append([exe, b])
    return commands


def _files_under(root: str) -> set[str]:
    if not os.path.isdir(root):
        return set()
    found: set[str] = set()
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            full = os.path.join(dirpath, name)
            if os.path.isfile(full):
                found.add(os.path.relpath(full, root))
    return found


__all__ = [
    "ENV_VARS",
    "MAX_VSCODE_FILE_DIFFS",
    "PYCHARM_LAUNCHERS",
    "VSCODE_LAUNCHERS",
    "EditorDetector",
    "EditorKind",
    "EditorLaunchError",
]
