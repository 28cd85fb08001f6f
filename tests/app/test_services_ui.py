"""``/services`` and ``ctrl+b`` in the chat: a declared service started in the branch on the
tab in front, listed with its forward (``b · web → http://127.0.0.1:PORT``), reached by
that branch's ``!cmd`` at localhost, opened in ``$BROWSER``, and gone with the fork."""

from __future__ import annotations

import stat
import urllib.request
from pathlib import Path

import pytest

from tests.app.conftest import (
    TERMINAL,
    chat_screen,
    make_app,
    open_fork,
    ready,
    states,
    submit,
    wait_for,
)
from tests.sandbox.conftest import wait_until_gone
from tests.sandbox.net_support import SERVER, requires_stack
from tests.support.typed import coordinator_of, view_of

pytestmark = [requires_stack]
MARKER = "forkdeck-services-ui-test"


@pytest.fixture
def served(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (project / "server.py").write_text(SERVER)
    (project / "who.txt").write_text("the parent\n")
    state = project / ".pydantic-deep"
    state.mkdir(exist_ok=True)
    (state / "config.toml").write_text(
        f'[services.web]\ncommand = "exec python3 server.py {MARKER} 8000"\nport = 8000\n'
        'ready = "http"\nstop_timeout = 3\n')
    browser = tmp_path / "browser.sh"
    opened = tmp_path / "opened.txt"
    browser.write_text(f"#!/bin/sh\necho \"$1\" > {opened}\n")
    browser.chmod(browser.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("BROWSER", str(browser))
    return opened


async def test_services_start_list_reach_open_and_end_with_the_fork(
    project: Path, served: Path
) -> None:
    app = make_app(project)
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        chat = chat_screen(app)
        await pilot.pause(1.2)  # the chat watches forwards from 1 s after its first frame
        area = await open_fork(pilot, ["quick a", "quick b"])
        await wait_for(pilot, lambda: set(states(app).values()) == {"done"},
                       what=lambda: states(app))
        area.select("b")
        rt_b = coordinator_of(app).get_branch("b")
        (view_of(rt_b) / "who.txt").write_text("branch b\n")
        await submit(pilot, "/services start web")
        await wait_for(pilot, lambda: "b · web → http://127.0.0.1:" in chat.last_notice,
                       timeout=30, what=lambda: chat.last_notice)
        # the notice may be the forward's own ("... → URL  (ctrl+b opens it)"): the URL only
        url = chat.last_notice.split("→ ")[1].split()[0]
        # the forward was also said as it opened (the fork's log strip shows notices)
        await wait_for(pilot, lambda: any(f"b · web → {url}  (ctrl+b opens it)" in line
                                          for line in chat.fork_log.lines_text),
                       what=lambda: chat.fork_log.lines_text)
        with urllib.request.urlopen(url + "/who.txt", timeout=10) as resp:
            assert resp.read() == b"branch b\n"
        await submit(pilot, "/services")
        assert f"b · web → {url}  (ready)" in chat.last_notice
        await submit(pilot, "!python3 -c \"import urllib.request as u;"
                            "print(u.urlopen('http://localhost:8000/who.txt').read())\"")
        await wait_for(pilot, lambda: "(exit 0, branch b)" in chat.last_notice,
                       timeout=30, what=lambda: chat.last_notice)
        assert "branch b" in chat.last_notice
        await pilot.press("ctrl+b")
        await wait_for(pilot, lambda: served.exists() and served.read_text().strip() == url,
                       what="the browser was started with the forward's URL")
        await submit(pilot, "/services log web")
        await wait_for(pilot, lambda: "GET /who.txt" in chat.last_notice,
                       what=lambda: chat.last_notice)
        await coordinator_of(app).abort_fork()
        assert wait_until_gone(MARKER) == []
        await submit(pilot, "/services")
        assert "no service running (declared: web" in chat.last_notice
