"""Fork rows that run external CLI agents (``agent:<profile>`` in the picker's model field):
the scripted agent CLI (``tests/external/scripted_agent.py``) on a pseudo-terminal in real
branch sandboxes, its terminal streamed into its panel with colours, ``>>label`` typed on
its terminal, and ``/merge`` landing its files like any branch's."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from forkdeck.fork.fork_picker import ForkPickerModal
from forkdeck.fork.terminal_block import TerminalBlock
from forkdeck.merge.merge_picker import MergePickerModal
from pydantic_ai.models.test import TestModel
from textual.widgets import Input

from branching_core.sandbox import sandbox_available
from tests.app.conftest import TERMINAL, chat_screen, make_app, ready, states, submit, wait_for
from tests.external.conftest import AGENT
from tests.support.typed import coordinator_of

pytestmark = pytest.mark.skipif(not sandbox_available()[0], reason="sandbox unavailable here")


def _terminal(area: object, label: str) -> TerminalBlock | None:
    panel = area._panels[label]  # type: ignore[attr-defined]
    blocks = [b for b in panel.blocks if isinstance(b, TerminalBlock)]
    return blocks[-1] if blocks else None


async def test_agent_rows_stream_steer_and_merge(project: Path) -> None:
    (project / ".pydantic-deep").mkdir()
    (project / ".pydantic-deep" / "config.toml").write_text(
        f'[agents.fixer]\ncommand = "{sys.executable} {AGENT} fix {{prompt}}"\n'
        f'[agents.waiter]\ncommand = "{sys.executable} {AGENT} steer {{prompt}}"\n'
        f'[agents.quiet]\ncommand = "{sys.executable} {AGENT} fix {{prompt}}"\nsteer = false\n')
    app = make_app(project, TestModel())
    async with app.run_test(size=TERMINAL) as pilot:
        await ready(pilot)
        await submit(pilot, "/fork-branches 2")
        await submit(pilot, "/fork")
        await wait_for(pilot, lambda: isinstance(app.screen, ForkPickerModal), what="picker")
        picker = app.screen
        for slot, (steer, model) in enumerate([("fix add", "agent:fixer"),
                                               ("wait for me", "agent:waiter")], start=1):
            picker.query_one(f"#steer-{slot}", Input).value = steer
            picker.query_one(f"#model-{slot}", Input).value = model
        await pilot.press("ctrl+s")
        chat = chat_screen(app)
        await wait_for(pilot, lambda: chat.fork_area is not None, what="the fork area")
        area = chat.fork_area

        def waiting() -> bool:
            block = _terminal(area, "b")
            return block is not None and "waiting for a steer" in block.plain

        await wait_for(pilot, waiting, timeout=60, what=lambda: states(app))
        await submit(pilot, ">>b hello from the chat")
        await wait_for(pilot, lambda: set(states(app).values()) == {"done"}, timeout=60,
                       what=lambda: states(app))
        block_a = _terminal(area, "a")
        assert block_a is not None and "starting fix" in block_a.plain
        assert "\x1b[36m" in block_a.text  # the agent's colours are kept for drawing
        block_b = _terminal(area, "b")
        assert block_b is not None and "steered: hello from the chat" in block_b.plain
        branch_b = coordinator_of(app).get_branch("b")
        assert (Path(branch_b.ws_branch.path) / "steered.txt").read_text().strip() == \
            "hello from the chat"

        await submit(pilot, "/merge")
        await wait_for(pilot, lambda: isinstance(app.screen, MergePickerModal), what="merge")
        await pilot.press("1", "enter")  # a digit chooses, Enter merges
        await wait_for(pilot, lambda: not app.session.fork_active, what="merged")
    assert (project / "calc.py").read_text().endswith("a + b\n")
    assert not (project / "steered.txt").exists()
