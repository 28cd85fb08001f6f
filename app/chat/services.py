"""``/services`` and ``ctrl+b``: the branches' services and host forwards in the chat.

Why a module of its own: it is a thin front on the engine's ``BranchNetwork`` (start,
stop, log, forwards) and touches the screen only through ``notice``. A fork branch's
network is made by the coordinator (``ForkOptions.network``) when the branch first runs;
outside a fork, ``/services start NAME`` runs the service for the workspace itself (label
``main``), closed when forkdeck exits.

``/services``                      every service and forward (``b · web → http://...``)
``/services start NAME [BRANCH]``  start a declared service (branch: the tab in front)
``/services stop NAME [BRANCH]``   stop it
``/services log NAME [BRANCH]``    its last lines (the log is bounded)
``/services open [BRANCH[:NAME]]`` open a forward in ``$BROWSER`` (``ctrl+b``: the tab's)
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..commands import Slash
    from .ports import ChatHost

USAGE = "/services [start|stop|log NAME [BRANCH] | open [BRANCH[:NAME]]]"


def _networks() -> list[Any]:
    from branching_core.sandbox import live_networks

    return live_networks()


def _lines() -> list[str]:
    lines = []
    for net in _networks():
        for name, svc in net.services.items():
            fwd = net.forwards.get(svc.spec.port) if svc.spec.port is not None else None
            where = f" → {fwd.url}" if fwd is not None else ""
            lines.append(f"{net.label} · {name}{where}  ({svc.status})")
        for port, fwd in net.forwards.items():
            if fwd.service is None:
                lines.append(f"{fwd.label()}  (port {port})")
    return lines


def _active_label(screen: ChatHost) -> str | None:
    area = screen.fork_area
    return area.active_label if area is not None else None


def _network_for(screen: ChatHost, label: str | None) -> Any:
    """The ``BranchNetwork`` of fork branch ``label``, else the workspace's own (made on
    first use). Runs in a worker thread: it reads only the session."""
    session = screen.session
    coordinator = session.coordinator
    if coordinator is not None and session.fork_active and label is not None:
        runtime = coordinator.get_branch(label)
        networks = getattr(coordinator.branch_files, "networks", None)
        if networks is None or runtime.ws_branch is None:
            raise ValueError(f"branch {label} has no network of its own (remote or closed)")
        return networks.for_branch(runtime.ws_branch)
    for net in _networks():
        if net.label == "main":
            return net
    return session.network_setup().for_path(session.root, label="main",
                                            workspace_root=session.root)


def services(screen: ChatHost, command: Slash) -> None:
    args = list(command.args)
    if not args:
        lines = _lines()
        declared = ", ".join(s.name for s in screen.session.network_setup().services)
        screen.notice("\n".join(lines) if lines else
                      f"no service running (declared: {declared or 'none'}; "
                      "/services start NAME)")
        return
    action, rest = args[0], args[1:]
    if action == "open":
        open_forward(screen, rest[0] if rest else None)
        return
    if action not in ("start", "stop", "log") or not 1 <= len(rest) <= 2:
        screen.notice(f"usage: {USAGE}", "error")
        return
    name, branch = rest[0], (rest[1] if len(rest) > 1 else None)
    screen.run_worker(_act(screen, branch, action, name), exclusive=False)


async def _act(screen: ChatHost, branch: str | None, action: str, name: str) -> None:
    try:  # making a branch's network starts its stack: not in the event loop
        label = branch or _active_label(screen)
        net = await asyncio.to_thread(_network_for, screen, label)
        if action == "log":
            svc = net.services.get(name)
            tail = svc.log.tail(20) if svc is not None else []
            screen.notice("\n".join(tail) if tail else f"{net.label} · {name}: no output")
        elif action == "start":
            await asyncio.to_thread(net.start_service, name)
            fwd = next((f for f in net.forwards.values() if f.service == name), None)
            screen.notice(fwd.label() if fwd is not None else f"{net.label} · {name} started")
        else:
            await asyncio.to_thread(net.stop_service, name)
            screen.notice(f"{net.label} · {name} stopped")
    except Exception as exc:
        screen.notice(f"/services {action} {name}: {exc}", "error")


def open_forward(screen: ChatHost, wanted: str | None = None) -> None:
    """Open a forward in ``$BROWSER``: ``BRANCH[:NAME]``, else the tab in front's (or the
    only one)."""
    from branching_core.cli import open_in_browser

    label = wanted or _active_label(screen)
    branch, _, name = (label or "").partition(":")
    forwards = [f for net in _networks() for f in net.forwards.values()]
    if branch:
        forwards = [f for f in forwards if f.branch == branch or f.branch.endswith(f"-{branch}")]
    if name:
        forwards = [f for f in forwards if name in (f.service, str(f.port))]
    if not forwards:
        screen.notice("no forward to open (/services start NAME)", "warning")
        return
    fwd = forwards[0]
    try:
        open_in_browser(fwd.url)
    except OSError as exc:
        screen.notice(f"cannot open a browser ({exc}): {fwd.url}", "error")
        return
    screen.notice(f"opened {fwd.label()}", toast=True)


def watch_forwards(screen: ChatHost) -> Any:
    """Say ``b · web → http://127.0.0.1:PORT`` in the chat whenever a forward opens (a fork
    branch's autostarted service, ``/services start``); returns the unsubscriber."""
    from branching_core.sandbox import add_forward_listener

    def show(forward: Any) -> None:
        screen.notice_from_thread(f"{forward.label()}  (ctrl+b opens it)")

    return add_forward_listener(show)
