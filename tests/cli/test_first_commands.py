"""What a new user types first (issue 24.5), through real subprocesses of the installed
commands: ``--version``/``-V``, ``--help`` listing every subcommand, ``run`` without ``--``,
``run --help``'s command placeholder, a mistyped subcommand, and ``branching`` naming itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from branching_core.cli import build_parser

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def forkdeck(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m forkdeck ARGS`` (the ``forkdeck`` script runs the same ``entry.main``)."""
    return subprocess.run([sys.executable, "-m", "forkdeck", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=60, check=False)


def _core_subcommands() -> dict[str, str]:
    import argparse

    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {c.dest: c.help or "" for c in action._choices_actions}
    raise AssertionError("the CLI has no subcommands")


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_prints_the_installed_version(flag: str) -> None:
    from importlib import metadata

    proc = forkdeck(flag)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"forkdeck {metadata.version('forkdeck')}"


def test_help_lists_every_subcommand_on_one_line_each() -> None:
    from forkdeck.entry import HEADLESS_COMMANDS
    from forkdeck.subcommands import EXTRA_HELP

    proc = forkdeck("--help")
    assert proc.returncode == 0, proc.stderr
    listed = proc.stdout.split("commands (forkdeck COMMAND --help", 1)[1].splitlines()[1:]
    rows = {line.split()[0]: line.split(None, 1)[1] for line in listed if line.strip()}
    core = _core_subcommands()
    expected = {name for name in core if name in HEADLESS_COMMANDS}
    assert expected >= {"run", "speculate", "best-of-n", "status", "models"}
    assert set(rows) == expected | {"demo"}  # demo: the app's own (tui.main)
    for name, text in rows.items():
        assert text == (core.get(name) or EXTRA_HELP[name]) and text, name
    assert "--version" in proc.stdout and "--model" in proc.stdout  # the TUI's options too


def test_run_without_double_dash_says_where_the_command_goes(tmp_path: Path) -> None:
    proc = forkdeck("run", "echo", "hi", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        "error: forkdeck run: put the command after --, e.g. forkdeck run -- echo hi"
    )
    assert list(tmp_path.iterdir()) == []  # nothing ran


def test_an_unknown_option_is_still_called_unrecognized(tmp_path: Path) -> None:
    proc = forkdeck("run", "--frobnicate", "--", "true", cwd=tmp_path)
    assert proc.returncode == 2
    assert "unrecognized arguments: --frobnicate" in proc.stderr


@pytest.mark.parametrize("command", ["run", "best-of-n", "reflexion", "tournament", "cascade"])
def test_help_of_a_command_that_runs_cmd_shows_the_placeholder(command: str) -> None:
    proc = forkdeck(command, "--help")
    assert proc.returncode == 0, proc.stderr
    usage = proc.stdout.split("\n\n", 1)[0]
    assert usage.startswith(f"usage: forkdeck {command} ")
    assert usage.rstrip().endswith("-- CMD ...")


def test_status_help_has_no_cmd_placeholder() -> None:
    proc = forkdeck("status", "--help")
    assert proc.returncode == 0 and "-- CMD" not in proc.stdout


@pytest.mark.parametrize(("typo", "meant"), [("stauts", "status"), ("speculte", "speculate"),
                                             ("modles", "models"), ("bestofn", "best-of-n")])
def test_a_mistyped_subcommand_suggests_the_right_one(
    tmp_path: Path, typo: str, meant: str
) -> None:
    proc = forkdeck(typo, "--json", cwd=tmp_path)
    assert proc.returncode == 2
    line = proc.stderr.strip()
    assert "\n" not in line and "does not exist" not in line
    assert f"did you mean 'forkdeck {meant}'" in line


def test_an_existing_directory_with_a_command_like_name_is_still_a_workspace(
    tmp_path: Path,
) -> None:
    """``forkdeck stauts`` suggests only when no such directory exists: a project folder
    named like a typo must still open (checked up to the argument parsing, with --help)."""
    (tmp_path / "stauts").mkdir()
    proc = forkdeck("stauts", "--help", cwd=tmp_path)
    assert proc.returncode == 0 and "did you mean" not in proc.stderr


def test_a_missing_workspace_with_no_close_command_says_so(tmp_path: Path) -> None:
    proc = forkdeck("zzzqqq", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("forkdeck: workspace zzzqqq does not exist")


def test_branching_names_itself() -> None:
    script = BIN / "branching"
    assert script.exists(), f"the branching script is installed beside {sys.executable}"
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(["branching", "--help"], capture_output=True, text=True, env=env,
                          timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: branching ")
    assert "forkdeck run" not in proc.stdout
    run_help = subprocess.run(["branching", "run", "--help"], capture_output=True, text=True,
                              env=env, timeout=60, check=False)
    assert run_help.stdout.startswith("usage: branching run ")
    typo = subprocess.run(["branching", "run", "echo", "hi"], capture_output=True, text=True,
                          env=env, timeout=60, check=False)
    assert "branching run -- echo hi" in typo.stderr


def test_a_new_subcommand_shows_up_in_help_and_suggestions() -> None:
    """The listing and the suggestion read one registry: a command added to
    HEADLESS_COMMANDS with a parser in build_parser appears in both, with nothing else."""
    import argparse

    from forkdeck import entry, subcommands

    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            action.add_parser("frobnicate", help="a command added after this test was written")
    helps = subcommands.command_help(parser, entry.HEADLESS_COMMANDS | {"frobnicate"})
    assert helps["frobnicate"] == "a command added after this test was written"
    assert "  frobnicate " in subcommands.listing(helps)
    assert subcommands.suggest("frobnicat", helps) == ["frobnicate"]
    # Without its name in HEADLESS_COMMANDS it is not reachable, so not offered.
    assert "frobnicate" not in subcommands.command_help(parser)
