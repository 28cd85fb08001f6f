"""Run ``test_command`` in every branch of a fork, concurrently, each in its own sandbox.

Where it runs: a throwaway copy-on-write child of the branch (one mount on the overlay
backend), so the tests see exactly the branch's files, while whatever they write
(``__pycache__``, ``.pytest_cache``, build output) is discarded instead of being merged
with the branch. When the branch takes no child (a stale branch) or ``scratch=False``, the
command runs in the branch itself, with pytest's cache and Python's bytecode turned off.
The command runs in ``branching_core.sandbox`` (own namespaces, host read-only, private
``/tmp``, whole tree killed on timeout).

What it reports: when the command runs pytest or ``node --test`` (directly or through a
wrapper such as ``make test`` or ``npm test``), the runner is asked through
``PYTEST_ADDOPTS`` / ``NODE_OPTIONS`` to write a JUnit XML report to the sandbox's private
``/tmp``; the wrapper shell copies it to an extra file descriptor we read back, so nothing
is written into the branch and no command line is rewritten. A jest report written to
``JSON_REPORT_PATH`` (the detected jest command asks for it) comes back the same way on a
second descriptor. Counts then come, first found, from: the JUnit report
(``source="junit"``), the jest report (``"jest-json"``), ``go test -json`` events on stdout
(``"go-json"``), cargo's ``test result:`` lines (``"cargo"``); see ``runner_output``. Any
other command counts as one test that passed iff it exited 0 (``source="exit_code"``).
Zero tests collected is not a pass (``pass_ratio == 0.0``); a timeout or a sandbox that
could not start gives ``source="none"`` (no evidence either way).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from branching_core.errors import InvalidArgumentError, error_name
from branching_core.review.detect_tests import JSON_REPORT_PATH
from branching_core.review.runner_output import (
    RunnerCounts,
    parse_cargo_summary,
    parse_go_test_json,
    parse_jest_json,
    parse_junit_counts,
)
from branching_core.review.types import BranchTestResult, TestSource

log = logging.getLogger(__name__)

DEFAULT_TEST_TIMEOUT_S = 60.0
JUNIT_PATH = "/tmp/forkdeck-junit.xml"
"""Inside the sandbox: its private ``/tmp``, invisible to the branch and to other branches."""
JUNIT_FD = 3
JSON_FD = 4
OUTPUT_TAIL_CHARS = 2000


JunitCounts = RunnerCounts
"""Kept for callers of the first version (the counts of any runner now)."""


def parse_junit(data: bytes) -> RunnerCounts | None:
    """Counts of a JUnit XML report (``None`` if unreadable); see ``parse_junit_counts``."""
    return parse_junit_counts(data)


def parse_counts(
    junit: bytes, json_report: bytes, stdout: str
) -> tuple[RunnerCounts, TestSource] | None:
    """The first runner output that parses, and its ``source`` name (order: module doc)."""
    counts = parse_junit_counts(junit)
    if counts is not None:
        return counts, "junit"
    counts = parse_jest_json(json_report) if json_report.strip() else None
    if counts is not None:
        return counts, "jest-json"
    counts = parse_go_test_json(stdout)
    if counts is not None:
        return counts, "go-json"
    counts = parse_cargo_summary(stdout)
    if counts is not None:
        return counts, "cargo"
    return None


def _wrap(command: str) -> str:
    """Run ``command`` in a subshell, then hand the reports (if any) over on fds 3 and 4."""
    return (
        f"rm -f {JUNIT_PATH} {JSON_REPORT_PATH}\n({command}\n)\nrc=$?\n"
        f"[ -f {JUNIT_PATH} ] && cat {JUNIT_PATH} >&{JUNIT_FD}\n"
        f"[ -f {JSON_REPORT_PATH} ] && cat {JSON_REPORT_PATH} >&{JSON_FD}\nexit $rc\n"
    )


def _env(base: Mapping[str, str] | None, *, in_place: bool = False) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    opts = [env.get("PYTEST_ADDOPTS", "").strip(), f"--junitxml={JUNIT_PATH}"]
    if in_place:  # running in the branch itself: leave no .pytest_cache behind
        opts.append("-p no:cacheprovider")
    env["PYTEST_ADDOPTS"] = " ".join(o for o in opts if o)
    # node --test (also behind npm/make): a JUnit report besides the usual spec output
    node = [
        env.get("NODE_OPTIONS", "").strip(),
        "--test-reporter=spec --test-reporter-destination=stdout",
        f"--test-reporter=junit --test-reporter-destination={JUNIT_PATH}",
    ]
    env["NODE_OPTIONS"] = " ".join(o for o in node if o)
    env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    return env


def _tail(stdout: str, stderr: str) -> str:
    text = (stdout + ("\n" + stderr if stderr else "")).strip()
    return text[-OUTPUT_TAIL_CHARS:]


def result_from(
    branch_id: str,
    label: str,
    command: str,
    *,
    exit_code: int | None,
    junit: bytes,
    timed_out: bool = False,
    duration_s: float = 0.0,
    output_tail: str = "",
    json_report: bytes = b"",
    stdout: str = "",
) -> BranchTestResult:
    """Turn what the run left (exit code, reports, stdout) into a ``BranchTestResult``."""
    base: dict[str, Any] = {
        "branch_id": branch_id,
        "label": label,
        "command": command,
        "exit_code": exit_code,
        "duration_s": duration_s,
        "output_tail": output_tail,
    }
    if timed_out or exit_code is None:
        reason = "timed out" if timed_out else "did not run"
        return BranchTestResult(**base, source="none", timed_out=timed_out, error=reason)
    parsed = parse_counts(junit, json_report, stdout)
    if parsed is not None:
        counts, source = parsed
        return BranchTestResult(
            **base,
            source=source,
            passed=counts.passed,
            failed=counts.failures,
            errors=counts.errors,
            skipped=counts.skipped,
            total=counts.executed,
            collected=counts.tests,
        )
    ok = exit_code == 0
    return BranchTestResult(
        **base, source="exit_code", passed=int(ok), failed=int(not ok), total=1, collected=1
    )


async def run_test_in_dir(
    branch_id: str,
    label: str,
    command: str,
    directory: Path,
    *,
    timeout: float = DEFAULT_TEST_TIMEOUT_S,
    limits: Any = None,
    env: Mapping[str, str] | None = None,
    in_place: bool = False,
) -> BranchTestResult:
    """Run ``command`` sandboxed in ``directory`` and report it (never raises for a failure).

    ``in_place``: ``directory`` is the branch itself, not a throwaway copy (pytest is then
    told not to write its cache; Python not to write bytecode).
    """
    from branching_core import sandbox

    started = time.monotonic()
    try:
        res = await sandbox.run_command_async(
            _wrap(command),
            directory,
            timeout=timeout,
            limits=limits,
            env=_env(env, in_place=in_place),
            extra_fds=[JUNIT_FD, JSON_FD],
        )
    except Exception as exc:  # the sandbox could not start: no evidence, say why
        return BranchTestResult(
            branch_id=branch_id,
            label=label,
            command=command,
            source="none",
            duration_s=time.monotonic() - started,
            error=f"{error_name(exc)}: {exc}",
        )
    return result_from(
        branch_id,
        label,
        command,
        exit_code=res.exit_code,
        junit=res.extra.get(JUNIT_FD, b""),
        json_report=res.extra.get(JSON_FD, b""),
        stdout=res.stdout,
        timed_out=res.timed_out,
        duration_s=res.duration or time.monotonic() - started,
        output_tail=_tail(res.stdout, res.stderr),
    )


async def _run_one(
    rt: Any,
    command: str,
    timeout: float,
    limits: Any,
    env: Mapping[str, str] | None,
    scratch: bool,
) -> BranchTestResult:
    branch = getattr(rt, "ws_branch", None)
    if branch is None:
        return BranchTestResult(
            branch_id=rt.branch_id,
            label=rt.label,
            command=command,
            source="none",
            error="branch has no workspace view (merged or discarded)",
        )
    child = None
    if scratch:
        try:
            child = await asyncio.to_thread(branch.branch, f"tests-{uuid.uuid4().hex[:8]}")
        except Exception as exc:  # e.g. a stale branch takes no children: run in place
            log.info("tests for %s run in the branch itself: %s", rt.label, exc)
    try:
        return await run_test_in_dir(
            rt.branch_id,
            rt.label,
            command,
            Path(child.path if child is not None else branch.path),
            timeout=timeout,
            limits=limits,
            env=env,
            in_place=child is None,
        )
    finally:
        if child is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(child.abort)


async def run_branch_tests(
    runtimes: Iterable[Any],
    test_command: str,
    *,
    timeout: float = DEFAULT_TEST_TIMEOUT_S,
    limits: Any = None,
    env: Mapping[str, str] | None = None,
    scratch: bool = True,
) -> dict[str, BranchTestResult]:
    """Run ``test_command`` in every branch at once; results keyed by branch id.

    ``timeout`` is wall-clock per branch (killed, reported as ``timed_out``); ``limits`` is
    a ``branching_core.sandbox.ResourceLimits`` applied to each run. ``scratch=False`` runs
    in the branch itself (what the tests write then stays in the branch, except pytest's
    cache and bytecode, which are turned off). Raises ``ValueError`` for an empty command.
    """
    if not test_command or not test_command.strip():
        raise InvalidArgumentError("test_command is empty")
    rts = list(runtimes)
    results = await asyncio.gather(
        *(_run_one(rt, test_command, timeout, limits, env, scratch) for rt in rts)
    )
    return {r.branch_id: r for r in results}


__all__ = [
    "DEFAULT_TEST_TIMEOUT_S",
    "JSON_FD",
    "JunitCounts",
    "parse_counts",
    "parse_junit",
    "result_from",
    "run_branch_tests",
    "run_test_in_dir",
]
