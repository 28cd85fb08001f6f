"""Test counts from each runner's machine output: JUnit XML, ``go test -json``, cargo's
summary lines, jest's ``--json`` report.

Why parsers and not the exit code: a branch whose tests "pass" because none were collected,
or one that fixed 9 of 10 failures, must look different to the judge from one that passed
everything. Every parser returns ``None`` when the text is not that runner's output (the
caller then tries the next one, and finally falls back to the exit code), so a parser
never invents counts.

Which output each runner gives, and how we get it without rewriting the user's command:

* pytest: ``PYTEST_ADDOPTS=--junitxml=...`` (see ``branch_tests``);
* ``node --test``: ``NODE_OPTIONS=--test-reporter=junit --test-reporter-destination=...``
  (node's JUnit has bare ``<testcase>`` elements and no counts on ``<testsuites>``, so JUnit
  counts come from the test cases);
* go: ``go test -json`` writes one JSON event per line on stdout;
* cargo: ``test result: ok. 3 passed; 0 failed; 1 ignored; ...`` per test binary on stdout
  (cargo's ``--format json`` needs a nightly toolchain, so the summary lines are used);
* jest: ``--json --outputFile=...`` (a single JSON object with ``numTotalTests`` etc).
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass


@dataclass(frozen=True)
class RunnerCounts:
    """What one run collected: ``tests`` includes ``skipped``; ``failures`` are failed
    assertions, ``errors`` are tests that crashed (JUnit's distinction; 0 elsewhere)."""

    tests: int
    failures: int
    errors: int = 0
    skipped: int = 0

    @property
    def passed(self) -> int:
        return max(self.tests - self.failures - self.errors - self.skipped, 0)

    @property
    def executed(self) -> int:
        return max(self.tests - self.skipped, 0)


def parse_junit_counts(data: bytes) -> RunnerCounts | None:
    """JUnit XML (pytest, node, vitest...): from the ``<testcase>`` elements when there are
    any (a ``<failure>``/``<error>``/``<skipped>`` child marks one), else the sum of the
    ``<testsuite>`` count attributes. ``None`` if the bytes are not a JUnit report."""
    if not data.strip():
        return None
    try:
        root = ET.fromstring(data)
    except ET.ParseError:
        return None
    if root.tag not in ("testsuites", "testsuite"):
        return None
    cases = list(root.iter("testcase"))
    if cases:
        failures = errors = skipped = 0
        for case in cases:
            tags = {child.tag for child in case}
            if "error" in tags:
                errors += 1
            elif "failure" in tags:
                failures += 1
            elif "skipped" in tags:
                skipped += 1
        return RunnerCounts(len(cases), failures, errors, skipped)
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    if not suites:
        return RunnerCounts(0, 0)
    totals = [0, 0, 0, 0]
    for suite in suites:
        for i, key in enumerate(("tests", "failures", "errors", "skipped")):
            try:
                totals[i] += int(suite.get(key, "0") or 0)
            except ValueError:
                return None
    return RunnerCounts(*totals)


def parse_go_test_json(stdout: str) -> RunnerCounts | None:
    """``go test -json`` events: the last ``pass``/``fail``/``skip`` action of every
    ``(Package, Test)`` (subtests count as tests, as gotestsum counts them). A package that
    fails to build has no test events; it is reported as one error so the run is not
    mistaken for "nothing to test". ``None`` when no line is a go test event."""
    final: dict[tuple[str, str], str] = {}
    build_failed: set[str] = set()
    seen = False
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict) or "Action" not in event:
            continue
        seen = True
        action = event.get("Action")
        package = str(event.get("Package", ""))
        test = event.get("Test")
        if test and action in ("pass", "fail", "skip"):
            final[(package, str(test))] = str(action)
        elif not test and action == "fail" and not any(k[0] == package for k in final):
            build_failed.add(package)
    if not seen:
        return None
    failures = sum(1 for a in final.values() if a == "fail")
    skipped = sum(1 for a in final.values() if a == "skip")
    return RunnerCounts(len(final) + len(build_failed), failures, len(build_failed), skipped)


_CARGO_RESULT = re.compile(
    r"^test result: (?:ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored; "
    r"(\d+) measured; (\d+) filtered out",
    re.MULTILINE,
)


def parse_cargo_summary(stdout: str) -> RunnerCounts | None:
    """The sum of cargo's ``test result:`` lines (one per unit/integration/doc-test binary;
    ``--no-fail-fast`` makes cargo run them all). Filtered-out tests are not counted,
    ignored ones count as skipped. ``None`` when there is no summary line."""
    matches = _CARGO_RESULT.findall(stdout)
    if not matches:
        return None
    passed = failed = ignored = measured = 0
    for p, f, i, m, _filtered in matches:
        passed, failed = passed + int(p), failed + int(f)
        ignored, measured = ignored + int(i), measured + int(m)
    return RunnerCounts(passed + failed + ignored + measured, failed, 0, ignored)


def parse_jest_json(data: bytes | str) -> RunnerCounts | None:
    """Jest's ``--json`` report (vitest's ``--reporter=json`` writes the same fields).
    Suites that failed to run (syntax error, missing module) count as errors."""
    try:
        doc = json.loads(data)
    except ValueError:
        return None
    if not isinstance(doc, dict) or "numTotalTests" not in doc:
        return None
    try:
        total = int(doc.get("numTotalTests", 0))
        failed = int(doc.get("numFailedTests", 0))
        skipped = int(doc.get("numPendingTests", 0)) + int(doc.get("numTodoTests", 0))
        broken = int(doc.get("numRuntimeErrorTestSuites", 0))
    except (TypeError, ValueError):
        return None
    return RunnerCounts(total + broken, failed, broken, skipped)


__all__ = [
    "RunnerCounts",
    "parse_cargo_summary",
    "parse_go_test_json",
    "parse_jest_json",
    "parse_junit_counts",
]
