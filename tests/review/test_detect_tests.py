"""Test-command detection and each runner's machine output, on real files and real runs.

cargo and node run for real in the sandbox (in real fork branches) when they exist on this
machine. jest is not installed in the project: its parser reads output recorded from a
real jest 29 run (``tests/review/data/jest.json``). go is not on this machine at all: its
sample (``go_test.jsonl``) is written by hand in ``go test -json``'s event format.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from branching_core.fork import MergeStrategy
from branching_core.review import resolve, run_branch_tests
from branching_core.review.branch_tests import parse_counts
from branching_core.review.detect_tests import (
    JSON_REPORT_PATH,
    choose_test_command,
    detect_test_command,
)
from branching_core.review.runner_output import (
    parse_cargo_summary,
    parse_go_test_json,
    parse_jest_json,
    parse_junit_counts,
)
from branching_core.workspace import Workspace

from .forks import JudgeScript, call, fork_with, project, runner, verdict, ws

__all__ = ["project", "runner", "ws"]

DATA = Path(__file__).parent / "data"


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.mark.parametrize(
    ("files", "source", "kind", "command"),
    [
        ({"pytest.ini": "[pytest]\n"}, "pytest.ini", "pytest", None),
        ({"pyproject.toml": "[tool.pytest.ini_options]\n"}, "pyproject.toml", "pytest", None),
        ({"tox.ini": "[tox]\n[pytest]\naddopts = -q\n"}, "tox.ini", "pytest", None),
        ({"setup.cfg": "[metadata]\n[tool:pytest]\n"}, "setup.cfg", "pytest", None),
        ({"pyproject.toml": "[project]\n", "tests/t.py": ""}, "pyproject.toml", "pytest", None),
        (
            {"package.json": '{"scripts": {"test": "node --test"}}'},
            "package.json",
            "node",
            "npm test",
        ),
        (
            {"package.json": '{"scripts": {"test": "vitest"}}', "pnpm-lock.yaml": ""},
            "package.json",
            "node",
            "pnpm test",
        ),
        (
            {"package.json": '{"scripts": {"test": "jest --ci"}}', "yarn.lock": ""},
            "package.json",
            "jest",
            f"yarn test --json --outputFile={JSON_REPORT_PATH}",
        ),
        (
            {"package.json": '{"scripts": {"test": "jest"}}'},
            "package.json",
            "jest",
            f"npm test -- --json --outputFile={JSON_REPORT_PATH}",
        ),
        ({"Cargo.toml": "[package]\n"}, "Cargo.toml", "cargo", "cargo test --no-fail-fast"),
        ({"go.mod": "module x\n"}, "go.mod", "go", "go test -json ./..."),
        ({"Makefile": "all:\n\ttrue\ntest: all\n\t./run\n"}, "Makefile", "make", "make test"),
        # issue 24.14: a module and its test file, no configuration at all
        ({"calc.py": "", "test_calc.py": ""}, "test_calc.py", "pytest", None),
        ({"calc.py": "", "calc_test.py": ""}, "calc_test.py", "pytest", None),
        ({"tests/test_calc.py": ""}, "tests/test_calc.py", "pytest", None),
        ({"test/io_test.py": ""}, "test/io_test.py", "pytest", None),
    ],
)
def test_detection_per_marker(
    tmp_path: Path, files: dict[str, str], source: str, kind: str, command: str | None
) -> None:
    found = detect_test_command(_write(tmp_path, files))
    assert found is not None
    assert (found.source, found.kind) == (source, kind)
    if command is not None:
        assert found.command == command
    else:
        assert "pytest" in found.command


@pytest.mark.parametrize(
    "files",
    [
        {},
        {"README.md": "hi\n"},
        {"package.json": '{"scripts": {"test": "echo \\"Error: no test specified\\" && exit 1"}}'},
        {"package.json": "{not json"},
        {"pyproject.toml": "[project]\nname = 'x'\n"},  # no tests anywhere
        {"pyproject.toml": "[tool.pytest.ini_options\n"},  # broken TOML is skipped, not fatal
        {"Makefile": "TEST := 1\nbuild:\n\ttrue\n"},
        {"calc.py": "", "testing.py": "", "deep/nested/test_x.py": ""},  # no walk below
    ],
)
def test_nothing_detected(tmp_path: Path, files: dict[str, str]) -> None:
    assert detect_test_command(_write(tmp_path, files)) is None


def test_workspace_venv_is_preferred(tmp_path: Path) -> None:
    _write(tmp_path, {"pytest.ini": "[pytest]\n", ".venv/bin/python": ""})
    found = detect_test_command(tmp_path)
    assert found is not None and found.command == ".venv/bin/python -m pytest -q"


def test_configured_command_wins(tmp_path: Path) -> None:
    _write(tmp_path, {"pytest.ini": "[pytest]\n"})
    chosen = choose_test_command("  make check ", tmp_path)
    assert chosen is not None and (chosen.command, chosen.source) == ("make check", "config")
    detected = choose_test_command(None, tmp_path)
    assert detected is not None and detected.source == "pytest.ini"
    assert detected.describe().endswith("(from pytest.ini)")


def test_go_test_json_recorded() -> None:
    counts = parse_go_test_json((DATA / "go_test.jsonl").read_text())
    assert counts is not None
    # TestAdd, TestTable(+zero,+negative), TestLater; the package that did not build is one
    # error; the package with no test files adds nothing
    assert (counts.tests, counts.failures, counts.errors, counts.skipped) == (6, 2, 1, 1)
    assert counts.passed == 2
    assert parse_go_test_json("ok  \texample.com/calc\t0.003s\n") is None


def test_jest_json_recorded() -> None:
    """Real jest 29 output (recorded): 2 pass, 1 fails, 1 skipped, 1 todo, and one test
    file that cannot load its module (a suite that never ran counts as one error)."""
    counts = parse_jest_json((DATA / "jest.json").read_bytes())
    assert counts is not None
    assert (counts.tests, counts.failures, counts.errors, counts.skipped) == (6, 1, 1, 2)
    assert (counts.passed, counts.executed) == (2, 4)
    assert parse_jest_json(b'{"other": 1}') is None and parse_jest_json(b"nope") is None


def test_cargo_summary_sums_every_binary() -> None:
    out = (
        "test result: FAILED. 1 passed; 1 failed; 1 ignored; 0 measured; 0 filtered out; "
        "finished in 0.28s\n\n"
        "test result: ok. 4 passed; 0 failed; 0 ignored; 0 measured; 2 filtered out; "
        "finished in 0.01s\n"
    )
    counts = parse_cargo_summary(out)
    assert counts is not None
    assert (counts.tests, counts.failures, counts.skipped, counts.passed) == (7, 1, 1, 5)
    assert parse_cargo_summary("error[E0425]: cannot find value `x`\n") is None


def test_node_junit_has_bare_testcases() -> None:
    xml = (DATA / "node_junit.xml").read_bytes()
    counts = parse_junit_counts(xml)
    assert counts is not None
    assert (counts.tests, counts.failures, counts.skipped, counts.passed) == (3, 1, 1, 1)


def test_parse_counts_order() -> None:
    junit = (
        b'<testsuite tests="2" failures="1"><testcase/><testcase><failure/></testcase></testsuite>'
    )
    counts, source = parse_counts(junit, b"", "") or (None, None)
    assert source == "junit" and counts is not None and counts.passed == 1
    assert parse_counts(b"", (DATA / "jest.json").read_bytes(), "")[1] == "jest-json"  # type: ignore[index]
    assert parse_counts(b"", b"", (DATA / "go_test.jsonl").read_text())[1] == "go-json"  # type: ignore[index]
    assert parse_counts(b"", b"", "plain output\n") is None


NODE_TESTS = (
    "const test = require('node:test');\nconst assert = require('node:assert');\n"
    "test('one', () => assert.strictEqual(1, 1));\n"
    "test('two', () => assert.strictEqual(1, {want}));\n"
    "test('later', {{ skip: true }}, () => {{}});\n"
)


@pytest.mark.skipif(shutil.which("npm") is None, reason="npm is not installed on this machine")
async def test_node_test_counts_from_a_real_run(ws: Workspace, project: Path) -> None:
    """``npm test`` -> ``node --test`` in the sandbox: NODE_OPTIONS asks for JUnit."""
    (project / "package.json").write_text('{"name": "x", "scripts": {"test": "node --test"}}')
    coord = await fork_with(
        ws,
        {
            "good": [call("write_file", path="test/a.test.js", content=NODE_TESTS.format(want=1))],
            "bad": [call("write_file", path="test/a.test.js", content=NODE_TESTS.format(want=2))],
        },
    )
    found = detect_test_command(project)
    assert found is not None and found.command == "npm test"
    results = await run_branch_tests(coord.branches.values(), found.command, timeout=120)
    by = {r.label: r for r in results.values()}
    assert (by["good"].source, by["good"].passed, by["good"].total, by["good"].skipped) == (
        "junit",
        2,
        2,
        1,
    )
    assert by["good"].ok and by["good"].exit_code == 0
    assert (by["bad"].passed, by["bad"].failed, by["bad"].total) == (1, 1, 2)
    assert not list(project.rglob("*.xml"))
    await coord.abort_fork()


CARGO_TOML = '[package]\nname = "demo"\nversion = "0.1.0"\nedition = "2021"\n'
LIB_RS = (
    "pub fn add(a: i32, b: i32) -> i32 {{ a + b }}\n"
    "#[cfg(test)]\nmod tests {{\n    use super::*;\n"
    "    #[test] fn ok() {{ assert_eq!(add(1, 2), 3); }}\n"
    "    #[test] fn other() {{ assert_eq!(add(1, 2), {want}); }}\n"
    "    #[test] #[ignore] fn later() {{}}\n}}\n"
)


@pytest.mark.skipif(shutil.which("cargo") is None, reason="cargo is not installed on this machine")
async def test_cargo_counts_from_a_real_run(ws: Workspace, project: Path) -> None:
    (project / "Cargo.toml").write_text(CARGO_TOML)
    coord = await fork_with(
        ws,
        {
            "good": [call("write_file", path="src/lib.rs", content=LIB_RS.format(want=3))],
            "bad": [call("write_file", path="src/lib.rs", content=LIB_RS.format(want=4))],
        },
    )
    found = detect_test_command(project)
    assert found is not None and found.kind == "cargo"
    results = await run_branch_tests(coord.branches.values(), found.command, timeout=300)
    by = {r.label: r for r in results.values()}
    good, bad = by["good"], by["bad"]
    assert (good.source, good.passed, good.total, good.skipped) == ("cargo", 2, 2, 1), good
    assert good.ok
    assert (bad.source, bad.passed, bad.failed, bad.exit_code) == ("cargo", 1, 1, 101)
    # the build output (target/) stayed in the throwaway child, not in the branch
    assert all(not (Path(rt.ws_branch.path) / "target").exists() for rt in coord.branches.values())
    await coord.abort_fork()


async def test_resolve_detects_the_test_command(ws: Workspace, project: Path) -> None:
    """No test_command anywhere: resolve() finds pytest.ini and runs pytest in each branch."""
    (project / "pytest.ini").write_text("[pytest]\n")
    (project / ".venv/bin").mkdir(parents=True)
    (project / ".venv/bin/python").symlink_to(sys.executable)
    good = "from src.app import VALUE\n\ndef test_value():\n    assert VALUE == 2\n"
    coord = await fork_with(
        ws,
        {
            "tidy": [
                call("write_file", path="src/app.py", content="VALUE = 2\n"),
                call("write_file", path="test_app.py", content=good),
            ],
            "wild": [call("write_file", path="src/app.py", content="VALUE = 99\n")],
        },
    )
    judge = JudgeScript([verdict("tidy", 0.9)])
    outcome = await resolve(coord, MergeStrategy(kind="auto_with_fallback"), judges=[judge.model])
    assert outcome.test_command is not None
    assert (outcome.test_command.source, outcome.test_command.kind) == ("pytest.ini", "pytest")
    by = {r.label: r for r in outcome.test_results.values()}
    assert (by["tidy"].source, by["tidy"].passed, by["tidy"].total) == ("junit", 1, 1)
    assert by["wild"].collected == 0
    assert "tests 1/1 passed (junit)" in judge.prompts[0]
    await coord.abort_fork()


async def test_empty_test_command_turns_detection_off(ws: Workspace, project: Path) -> None:
    (project / "pytest.ini").write_text("[pytest]\n")
    coord = await fork_with(ws, {"a": [call("write_file", path="x.txt", content="x")]})
    judge = JudgeScript([verdict("a", 0.5)])
    outcome = await resolve(
        coord, MergeStrategy(kind="auto_with_fallback"), judges=[judge.model], test_command=""
    )
    assert outcome.test_command is None and outcome.test_results == {}
    await coord.abort_fork()


def test_recorded_samples_are_json() -> None:
    for line in (DATA / "go_test.jsonl").read_text().splitlines():
        json.loads(line)
