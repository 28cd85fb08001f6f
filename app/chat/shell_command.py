"""``!cmd`` from the chat: the engine's command runner, in the right directory.

Why not ``asyncio.create_subprocess_shell`` (what the screen did): a plain ``sh`` in the
app's session lets a backgrounded child (``sleep 100 &``) hold the output pipe for the
whole timeout and survive the kill (issue 15.5), and on a branch tab it ran in the real
workspace under the fork's feet (issue 13.3). The engine's runner (the same one the
agent's ``run_command`` tool uses) starts the command in a sandbox with its own pid
namespace, kills the whole tree on timeout or cancellation (Esc), and on a branch runs
in that branch's copy-on-write directory, so nothing reaches the parent before a merge.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel

SHELL_TIMEOUT_S = 60.0
SHELL_OUTPUT_LIMIT = 4000


@dataclass(frozen=True)
class ShellTarget:
    """Where a ``!cmd`` runs: ``cwd``, and the branch label (None: the parent workspace)."""

    cwd: Path
    label: str | None = None
    runner: Any = None
    """A ``branching_core.agent.commands.CommandRunner``; None: the sandbox runner."""


def default_runner() -> Any:
    """The engine's sandboxed runner (imported lazily: it is not needed for the first frame)."""
    from branching_core.agent import SandboxCommandRunner

    return SandboxCommandRunner()


def branch_target(coordinator: Any, label: str) -> ShellTarget:
    """The sandbox directory of branch ``label``; ValueError when it has none any more."""
    runtime = coordinator.get_branch(label)
    if runtime.path is None or runtime.ws_branch is None:
        raise ValueError(f"branch {label} has no workspace any more (merged or discarded)")
    from branching_core.fork import is_hosted_id

    if is_hosted_id(getattr(runtime.ws_branch, "id", None)):
        # Its files live in a Ray actor on a node; the local directory is a read-only copy,
        # and a command's writes there would never reach the branch (lost at merge).
        raise ValueError(f"branch {label} runs on a cluster node: !cmd cannot run in it here")
    runner = getattr(coordinator, "command_runner", None)
    networks = getattr(getattr(coordinator, "branch_files", None), "networks", None)
    if networks is not None:  # the branch's own network: its services at localhost
        runner = networks.runner(runtime.ws_branch, runner)
    return ShellTarget(Path(runtime.path), label, runner)


async def run_shell_command(
    target: ShellTarget, command: str, on_line: Callable[[str], None] | None = None
) -> tuple[str, SeverityLevel]:
    """Run ``command``; returns ``(text, severity)`` for the notice that reports it.

    ``on_line`` gets each output line as it arrives (the fork view's log strip shows them
    live). Cancelling the awaiting task kills the command's whole process tree.
    """
    runner = target.runner or default_runner()

    def forward(_stream: str, line: str) -> None:
        if on_line is not None:
            on_line(line)

    try:
        outcome = await runner(command, cwd=target.cwd, timeout=SHELL_TIMEOUT_S, on_output=forward)
    except ImportError as exc:
        return f"!{command}: the sandbox is not available here ({exc}); nothing ran", "error"
    except OSError as exc:
        return f"!{command}: {exc}", "error"
    text = (outcome.stdout + outcome.stderr).rstrip()
    if len(text) > SHELL_OUTPUT_LIMIT:
        half = SHELL_OUTPUT_LIMIT // 2
        text = text[:half] + "\n[…]\n" + text[-half:]
    where = f", branch {target.label}" if target.label else ""
    if outcome.timed_out:
        tail = f"killed after {SHELL_TIMEOUT_S:g} s{where}"
        return (f"{text}\n({tail})" if text else f"!{command}: {tail}"), "error"
    status = f"(exit {outcome.exit_code}{where})"
    severity = "information" if outcome.exit_code == 0 else "warning"
    return (f"{text}\n{status}" if text else status), severity
