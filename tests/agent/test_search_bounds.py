"""``grep`` and ``glob`` are bounded: a catastrophic regex stops with a clear tool error and
never freezes the rest of the process; files a search did not look at are named."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic_ai import ToolFailed

from branching_core.agent import LocalCommandRunner, WorkspaceToolset, create_workspace_toolset
from branching_core.agent.search import Deadline, LineSearch, SearchTimeoutError, compile_regex
from branching_core.agent.toolset import MAX_GREP_FILE_BYTES

from .test_toolset import call_through_agent

# Exponential for every backtracking engine: Python's re needs ~1 s for it on an idle core,
# the regex engine longer; both far beyond the 0.3 s budget the tests give a search.
CATASTROPHIC = r"^(a|aa)+$"
VICTIM_LINE = "a" * 34 + "b"


@pytest.fixture
def bounded(ws: Path) -> WorkspaceToolset:
    (ws / "victim.txt").write_text(f"ok\n{VICTIM_LINE}\n")
    tools = create_workspace_toolset(ws, command_runner=LocalCommandRunner())
    tools.search_timeout = 0.3
    return tools


def test_catastrophic_grep_lets_other_threads_run(bounded: WorkspaceToolset) -> None:
    """While the search backtracks, another thread keeps ticking (the GIL is released).

    The ticker sleeps 1 ms per tick; a thread holding the GIL in C code (Python's re) stops
    it dead until the search ends, so the count, not a clock, tells the two apart.
    """
    outcome: list[BaseException | str] = []

    def search() -> None:
        try:
            outcome.append(bounded.grep(CATASTROPHIC))
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=search)
    ticks = 0
    worker.start()
    while worker.is_alive():
        ticks += 1
        time.sleep(0.001)
    worker.join()
    assert isinstance(outcome[0], ToolFailed), outcome
    assert "grep stopped" in outcome[0].message and "backtrack" in outcome[0].message
    assert ticks >= 50, f"the other thread made only {ticks} ticks during the search"


async def test_catastrophic_grep_reaches_the_model_as_a_failure(bounded: WorkspaceToolset) -> None:
    part = await call_through_agent(bounded, "grep", pattern=CATASTROPHIC)
    assert part.outcome == "failed"
    assert "took longer than 0.3s" in part.model_response_str()


def test_grep_still_finds_what_it_can_within_the_budget(bounded: WorkspaceToolset) -> None:
    assert bounded.grep(r"^a+b$") == f"victim.txt:2: {VICTIM_LINE}"
    assert bounded.grep(r"(?i)^OK$") == "victim.txt:1: ok"


def test_deadline_bounds_every_match_call() -> None:
    deadline = Deadline(0.2)
    with pytest.raises(SearchTimeoutError):
        deadline.search(compile_regex(CATASTROPHIC), "a" * 40 + "b")
    with pytest.raises(SearchTimeoutError):  # and once spent, it stays spent
        deadline.search(compile_regex("x"), "x")


def test_a_search_over_a_huge_tree_stops_cleanly(ws: Path) -> None:
    tools = create_workspace_toolset(ws, command_runner=LocalCommandRunner())
    tools.search_timeout = 0.0
    with pytest.raises(ToolFailed, match="glob stopped"):
        tools.glob("**/*")
    with pytest.raises(ToolFailed, match="grep stopped"):
        tools.grep("x")


# -- 12.19: grep says what it skipped; read_file never blocks on a FIFO -------------------


def test_grep_names_the_files_it_skipped(tools: WorkspaceToolset, ws: Path) -> None:
    big = ws / "big.log"
    with open(big, "wb") as fh:
        fh.truncate(MAX_GREP_FILE_BYTES + 1)  # sparse: nothing written, still over the limit
    out = tools.grep("needle")
    assert out.startswith("no matches for 'needle'")
    assert "not searched: 1 file over 5 MB: big.log" in out
    (ws / "hello.txt").write_text("needle\n")
    out = tools.grep("needle")
    assert out.splitlines()[0] == "hello.txt:1: needle"
    assert "big.log" in out.splitlines()[-1]


def _as_nobody(func: Callable[[], str]) -> str:
    """``func()`` in a forked child that dropped to uid/gid 65534 (root cannot be denied a
    read, so unreadability is staged for a real unprivileged user)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setresgid(65534, 65534, 65534)
            os.setresuid(65534, 65534, 65534)
            os.write(write_end, func().encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as fh:
        out = fh.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out
    return out


def test_grep_names_unreadable_files() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to switch to uid 65534")
    root = Path(tempfile.mkdtemp(prefix="forkdeck-grep-"))
    try:
        root.chmod(0o755)
        (root / "open.txt").write_text("needle\n")
        (root / "secret.txt").write_text("needle\n")
        (root / "secret.txt").chmod(0o600)  # root's; uid 65534 cannot read it
        (root / "open.txt").chmod(0o644)
        tools = create_workspace_toolset(root, command_runner=LocalCommandRunner())
        out = _as_nobody(lambda: tools.grep("needle"))
        assert out.splitlines() == [
            "open.txt:1: needle",
            "[not searched: 1 file unreadable: secret.txt; use run_command with grep for those]",
        ]
    finally:
        shutil.rmtree(root)


def _in_thread(func: object) -> list[object]:
    """Run ``func`` in a daemon thread; a call that blocks forever leaves ``[]``."""
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(func())  # type: ignore[operator]
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout=10)
    return outcome


def test_read_file_refuses_a_fifo_without_blocking(tools: WorkspaceToolset, ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    for call in (
        lambda: tools.read_file("pipe"),
        lambda: tools.edit_file("pipe", "a", "b"),
        lambda: tools.write_file("pipe", "x"),
    ):
        outcome = _in_thread(call)
        assert outcome, "the tool blocked on a FIFO"
        assert isinstance(outcome[0], ToolFailed), outcome
        assert "named pipe" in outcome[0].message
    assert (ws / "pipe").is_fifo()


def test_grep_and_glob_pass_a_fifo_by(tools: WorkspaceToolset, ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    assert _in_thread(lambda: tools.grep("hello")) == ["hello.txt:1: hello world"]
    assert "pipe" in _in_thread(lambda: tools.glob("*"))[0]  # type: ignore[operator]


# -- the whole-text fast path finds exactly the lines a line-by-line search finds ----------

ORACLE_PATTERNS = [
    "^a",
    "b$",
    "a.b",
    r"\bab\b",
    r"a\s*b",
    "[^x]+b",
    "(?s)a.*b",
    "a\nb",
    "^$",
    "(ab)+",
    "a|^b",
    "x*",
    "(?<=a)b",
    r"\Aa",
    r"b\Z",
    "(?m)^b",
    r"\w+\s\w+",
    r"b\s",
    r"\s$",
    "(?i)AB",
    r"(a)\1",
]


@pytest.mark.parametrize("pattern", ORACLE_PATTERNS)
def test_line_search_agrees_with_re_line_by_line(pattern: str) -> None:
    import random
    import re

    rng = random.Random(pattern)
    tokens = ["a", "b", "ab", " ", "  ", "x", "\t", "ba", "aa", "bb", ""]
    oracle = re.compile(pattern)
    search = LineSearch(pattern)
    for _ in range(300):
        lines = [
            "".join(rng.choices(tokens, k=rng.randint(0, 6))) for _ in range(rng.randint(1, 8))
        ]
        expected = [i for i, line in enumerate(lines) if oracle.search(line)]
        assert search.matching_lines(lines, Deadline(30)) == expected, lines
