"""The diff-tool detector and launcher.

Launch tests start real processes: a tiny Python "difftool" that records the argv it
received as JSON, so the assertions are about what a real program actually got.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from branching_core.errors import BranchingError
from branching_core.review import EditorDetector
from branching_core.review.editor import MAX_VSCODE_FILE_DIFFS, EditorLaunchError

HOSTILE_NAMES = [
    "$(touch pwned)",
    "; rm -rf victim",
    "`touch pwned`",
    "with space.txt",
    'it\'s "quoted".py',
    "-rf",
    "{branches}",
    "a|b&c>out",
]

RECORDER = """\
import json, os, sys
out = os.environ["ARGV_RECORD_DIR"]
with open(os.path.join(out, f"{os.getpid()}.json"), "w") as handle:
    json.dump(sys.argv[1:], handle)
"""


@pytest.fixture
def recorder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[int], list[list[str]]]:
    """Set up the argv recorder; calling the fixture waits for ``n`` records and returns them."""
    record_dir = tmp_path / "records"
    record_dir.mkdir()
    monkeypatch.setenv("ARGV_RECORD_DIR", str(record_dir))

    def collect(n: int) -> list[list[str]]:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            files = sorted(record_dir.glob("*.json"))
            if len(files) >= n:
                break
            time.sleep(0.02)
        records = [json.loads(f.read_text()) for f in sorted(record_dir.glob("*.json"))]
        assert len(records) == n, records
        return records

    return collect


def make_tool(bin_dir: Path, name: str) -> Path:
    """An executable called ``name`` that records its argv (stands in for pycharm/code)."""
    bin_dir.mkdir(exist_ok=True)
    tool = bin_dir / name
    tool.write_text(f"#!{sys.executable}\n{RECORDER}")
    tool.chmod(0o755)
    return tool


def fake_which(*available: str) -> Callable[[str], str | None]:
    return lambda name: f"/opt/bin/{name}" if name in available else None


def wait_all(processes: list) -> list[int]:
    return [p.wait(timeout=20) for p in processes]


# --------------------------------------------------------------------------- detection


def test_env_override_beats_everything_on_path() -> None:
    which = fake_which("pycharm", "code")
    assert EditorDetector.detect({"PYDANTIC_DEEP_DIFFTOOL": "meld {parent}"}, which=which) == (
        "custom"
    )
    assert EditorDetector.detect({"FORKDECK_DIFFTOOL": "meld {parent}"}, which=which) == "custom"


def test_pydantic_deep_variable_is_read_before_forkdeck_variable() -> None:
    env = {"PYDANTIC_DEEP_DIFFTOOL": "first {parent}", "FORKDECK_DIFFTOOL": "second {parent}"}
    assert EditorDetector.template(env) == "first {parent}"
    assert EditorDetector.template({"FORKDECK_DIFFTOOL": "second {parent}"}) == "second {parent}"


def test_blank_override_is_ignored() -> None:
    env = {"PYDANTIC_DEEP_DIFFTOOL": "   ", "FORKDECK_DIFFTOOL": ""}
    assert EditorDetector.detect(env, which=fake_which("code")) == "vscode"


def test_keywords_pick_a_kind_instead_of_a_template() -> None:
    which = fake_which("pycharm", "code")
    assert EditorDetector.detect({"FORKDECK_DIFFTOOL": "tui"}, which=which) == "tui"
    assert EditorDetector.detect({"FORKDECK_DIFFTOOL": "code"}, which=which) == "vscode"
    assert EditorDetector.detect({"FORKDECK_DIFFTOOL": "VSCode"}, which=which) == "vscode"
    assert EditorDetector.template({"FORKDECK_DIFFTOOL": "tui"}) is None


def test_difftool_setting_is_used_after_the_environment() -> None:
    which = fake_which("pycharm")
    assert EditorDetector.detect({}, which=which, difftool="kdiff3 {parent} {branches}") == (
        "custom"
    )
    assert EditorDetector.template({}, difftool="kdiff3 {parent}") == "kdiff3 {parent}"
    assert EditorDetector.detect({}, which=which, difftool="vscode") == "vscode"
    env = {"FORKDECK_DIFFTOOL": "meld {parent} {branch}"}
    assert EditorDetector.template(env, difftool="kdiff3 {parent}") == "meld {parent} {branch}"
    assert EditorDetector.detect({"FORKDECK_DIFFTOOL": "tui"}, which=which, difftool="x") == "tui"


def test_path_order_pycharm_then_code_then_tui() -> None:
    assert EditorDetector.detect({}, which=fake_which("pycharm", "code")) == "pycharm"
    assert EditorDetector.detect({}, which=fake_which("pycharm-community", "code")) == "pycharm"
    assert EditorDetector.detect({}, which=fake_which("code")) == "vscode"
    assert EditorDetector.detect({}, which=fake_which("codium")) == "vscode"
    assert EditorDetector.detect({}, which=fake_which()) == "tui"
    assert EditorDetector.launcher("pycharm", which=fake_which("charm")) == "/opt/bin/charm"
    assert EditorDetector.launcher("tui", which=fake_which("pycharm")) is None


def test_env_none_reads_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYDANTIC_DEEP_DIFFTOOL", raising=False)
    monkeypatch.setenv("FORKDECK_DIFFTOOL", "meld {parent} {branch}")
    assert EditorDetector.detect(which=fake_which("pycharm")) == "custom"
    monkeypatch.delenv("FORKDECK_DIFFTOOL")
    assert EditorDetector.detect(which=fake_which()) == "tui"


# --------------------------------------------------------------------------- pycharm


def test_pycharm_two_branches_puts_the_parent_in_the_middle_pane() -> None:
    # IntelliJ's DiffApplication shows the *third* path as the base (middle pane).
    commands = EditorDetector.build_commands(
        "pycharm", Path("/f/parent/x.py"), [Path("/f/a/x.py"), Path("/f/b/x.py")]
    )
    assert commands == [["pycharm", "diff", "/f/a/x.py", "/f/b/x.py", "/f/parent/x.py"]]


def test_pycharm_one_branch_and_more_than_two() -> None:
    parent = Path("/f/p")
    one = EditorDetector.build_commands("pycharm", parent, [Path("/f/a")])
    assert one == [["pycharm", "diff", "/f/p", "/f/a"]]
    three = EditorDetector.build_commands("pycharm", parent, [Path(f"/f/{n}") for n in "abc"])
    assert three == [
        ["pycharm", "diff", "/f/a", "/f/b", "/f/p"],
        ["pycharm", "diff", "/f/p", "/f/c"],
    ]
    four = EditorDetector.build_commands("pycharm", parent, [Path(f"/f/{n}") for n in "abcd"])
    assert four == [
        ["pycharm", "diff", "/f/a", "/f/b", "/f/p"],
        ["pycharm", "diff", "/f/c", "/f/d", "/f/p"],
    ]
    assert all(len(argv) <= 5 for argv in four)  # pycharm diff takes at most 3 paths


def test_pycharm_without_parent_compares_branches() -> None:
    commands = EditorDetector.build_commands("pycharm", None, [Path("/f/a"), Path("/f/b")])
    assert commands == [["pycharm", "diff", "/f/a", "/f/b"]]
    with pytest.raises(EditorLaunchError):
        EditorDetector.build_commands("pycharm", None, [Path("/f/a")])


def test_pycharm_directories_are_compared_two_way_per_branch(tmp_path: Path) -> None:
    parent, a, b = (tmp_path / n for n in ("parent", "a", "b"))
    for d in (parent, a, b):
        d.mkdir()
    commands = EditorDetector.build_commands("pycharm", parent, [a, b])
    assert commands == [
        ["pycharm", "diff", str(parent), str(a)],
        ["pycharm", "diff", str(parent), str(b)],
    ]


def test_directory_against_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("x")
    with pytest.raises(EditorLaunchError, match="directory with a file"):
        EditorDetector.build_commands("pycharm", tmp_path / "dir", [tmp_path / "file"])


def test_pycharm_invoke_runs_the_launcher_found_on_path(tmp_path: Path, recorder) -> None:
    bin_dir = tmp_path / "bin"
    make_tool(bin_dir, "pycharm")
    parent = tmp_path / "parent" / "x.py"
    a, b = tmp_path / "a" / "x.py", tmp_path / "b" / "x.py"

    def which(name: str) -> str | None:
        return shutil.which(name, path=str(bin_dir))

    processes = EditorDetector.invoke("pycharm", parent, [a, b], which=which)
    assert len(processes) == 1
    assert wait_all(processes) == [0]
    assert recorder(1) == [["diff", str(a), str(b), str(parent)]]


def test_invoke_without_launcher_raises_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(EditorLaunchError) as info:
        EditorDetector.invoke("vscode", tmp_path, [tmp_path], which=fake_which())
    assert "\n" not in str(info.value) and "code" in str(info.value)
    assert isinstance(info.value, BranchingError)


# --------------------------------------------------------------------------- vscode


def test_vscode_is_pairwise_one_command_per_branch() -> None:
    branches = [Path("/f/a/x.py"), Path("/f/b/x.py"), Path("/f/c/x.py")]
    commands = EditorDetector.build_commands("vscode", Path("/f/p/x.py"), branches)
    assert commands == [["code", "--diff", "/f/p/x.py", str(b)] for b in branches]


def test_vscode_directories_expand_to_per_file_diffs(tmp_path: Path) -> None:
    parent, branch = tmp_path / "parent", tmp_path / "branches" / "approach_a"
    for root in (parent, branch):
        (root / "src").mkdir(parents=True)
        (root / "same.txt").write_text("unchanged\n")
    (parent / "src" / "app.py").write_text("old\n")
    (branch / "src" / "app.py").write_text("new\n")
    (parent / "gone.txt").write_text("deleted by the branch\n")
    (branch / "src" / "added.py").write_text("created by the branch\n")

    commands = EditorDetector.build_commands("vscode", parent, [branch])
    assert commands == [
        ["code", str(branch / "src" / "added.py")],
        ["code", "--diff", str(parent / "src" / "app.py"), str(branch / "src" / "app.py")],
    ]


def test_vscode_directories_with_too_many_files_refuse(tmp_path: Path) -> None:
    parent, branch = tmp_path / "parent", tmp_path / "branch"
    parent.mkdir()
    branch.mkdir()
    for i in range(MAX_VSCODE_FILE_DIFFS + 1):
        (parent / f"f{i}.txt").write_text("a")
        (branch / f"f{i}.txt").write_text("b")
    with pytest.raises(EditorLaunchError, match="TUI"):
        EditorDetector.build_commands("vscode", parent, [branch])


def test_vscode_invoke_starts_one_process_per_branch(tmp_path: Path, recorder) -> None:
    bin_dir = tmp_path / "bin"
    make_tool(bin_dir, "code")
    parent = tmp_path / "p.txt"
    branches = [tmp_path / "a.txt", tmp_path / "b.txt"]

    def which(name: str) -> str | None:
        return shutil.which(name, path=str(bin_dir))

    processes = EditorDetector.invoke("vscode", parent, branches, which=which)
    assert wait_all(processes) == [0, 0]
    assert sorted(recorder(2)) == sorted(["--diff", str(parent), str(b)] for b in branches)


# --------------------------------------------------------------------------- tui


def test_tui_builds_and_starts_nothing(tmp_path: Path) -> None:
    assert EditorDetector.build_commands("tui", tmp_path, [tmp_path]) == []
    assert EditorDetector.invoke("tui", tmp_path, [tmp_path]) == []


# --------------------------------------------------------------------------- custom


def hostile_tree(root: Path) -> tuple[Path, list[Path]]:
    parent = root / "parent $(touch pwned)"
    parent.mkdir()
    branches = []
    for name in HOSTILE_NAMES:
        path = root / "branches" / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(name)
        branches.append(path)
    return parent, branches


def assert_nothing_ran(root: Path) -> None:
    assert not list(root.rglob("pwned")), "a file name was executed by a shell"
    assert not (root / "out").exists()
    assert (root / "victim" / "keep.txt").read_text() == "still here"


def test_hostile_file_names_reach_the_tool_as_exact_separate_arguments(
    tmp_path: Path, recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # anything a shell ran would land here
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "keep.txt").write_text("still here")
    script = tmp_path / "record argv.py"
    script.write_text(RECORDER)
    parent, branches = hostile_tree(tmp_path)
    template = (
        f"{shlex.quote(sys.executable)} {shlex.quote(str(script))} --base={{parent}} {{branches}}"
    )

    processes = EditorDetector.invoke(
        "custom", parent, branches, env={"FORKDECK_DIFFTOOL": template}
    )
    assert wait_all(processes) == [0]
    [argv] = recorder(1)
    assert argv == [f"--base={parent}", *map(str, branches)]
    assert_nothing_ran(tmp_path)


def test_branch_placeholder_runs_the_tool_once_per_branch(
    tmp_path: Path, recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "keep.txt").write_text("still here")
    script = tmp_path / "rec.py"
    script.write_text(RECORDER)
    parent, branches = hostile_tree(tmp_path)
    template = f"{sys.executable} {script} {{parent}} {{branch}}"

    processes = EditorDetector.invoke("custom", parent, branches, custom_cmd=template)
    assert len(processes) == len(branches)
    assert wait_all(processes) == [0] * len(branches)
    assert sorted(recorder(len(branches))) == sorted([str(parent), str(b)] for b in branches)
    assert_nothing_ran(tmp_path)


def test_shell_template_passing_names_as_positional_arguments_is_safe(
    tmp_path: Path, recorder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "keep.txt").write_text("still here")
    script = tmp_path / "rec.py"
    script.write_text(RECORDER)
    parent, branches = hostile_tree(tmp_path)
    template = (
        f"""sh -c 'exec "$0" "$@"' {shlex.quote(sys.executable)} {shlex.quote(str(script))} """
        "{parent} {branches}"
    )
    processes = EditorDetector.invoke("custom", parent, branches, custom_cmd=template)
    assert wait_all(processes) == [0]
    assert recorder(1) == [[str(parent), *map(str, branches)]]
    assert_nothing_ran(tmp_path)


def test_placeholders_inside_a_shell_script_are_refused() -> None:
    for template in ('sh -c "meld {parent} {branches}"', "bash -lc 'diff -r {parent} {branch}'"):
        with pytest.raises(EditorLaunchError, match="shell -c"):
            EditorDetector.build_commands("custom", Path("/p"), [Path("/a")], custom_cmd=template)


def test_placeholder_as_program_is_refused() -> None:
    with pytest.raises(EditorLaunchError, match="program"):
        EditorDetector.build_commands(
            "custom", Path("/p"), [Path("/a")], custom_cmd="{parent} {branches}"
        )


def test_custom_template_substitution_rules() -> None:
    build = EditorDetector.build_commands
    parent, a, b = Path("/p"), Path("/a"), Path("/b")
    assert build("custom", parent, [a, b], custom_cmd="tool --right={branches} -x") == [
        ["tool", "--right=/a", "--right=/b", "-x"]
    ]
    # No placeholder at all: parent and branches are appended.
    assert build("custom", parent, [a, b], custom_cmd="kdiff3 --auto") == [
        ["kdiff3", "--auto", "/p", "/a", "/b"]
    ]
    # No parent snapshot: the argument naming it is left out.
    assert build("custom", None, [a, b], custom_cmd="tool --base={parent} {branches}") == [
        ["tool", "/a", "/b"]
    ]
    # Quoted words stay one argument; other braces are not touched.
    assert build("custom", parent, [a], custom_cmd="tool 'two words' {x} {branch}") == [
        ["tool", "two words", "{x}", "/a"]
    ]


def test_relative_and_dash_paths_become_absolute(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    commands = EditorDetector.build_commands(
        "custom", Path("-parent"), [Path("-rf")], custom_cmd="tool {parent} {branches}"
    )
    assert commands == [["tool", str(tmp_path / "-parent"), str(tmp_path / "-rf")]]


def test_bad_templates_and_inputs_raise_one_line_errors() -> None:
    cases = [
        ("custom", "meld '{parent}", [Path("/a")]),
        ("custom", "   ", [Path("/a")]),
        ("custom", None, [Path("/a")]),
        ("custom", "meld {parent} {branches}", []),
    ]
    for kind, template, branches in cases:
        with pytest.raises(EditorLaunchError) as info:
            EditorDetector.build_commands(kind, Path("/p"), branches, custom_cmd=template)
        assert str(info.value) and "\n" not in str(info.value)


def test_missing_custom_program_is_a_launch_error(tmp_path: Path) -> None:
    with pytest.raises(EditorLaunchError, match="cannot start"):
        EditorDetector.invoke(
            "custom",
            tmp_path,
            [tmp_path],
            custom_cmd=f"{tmp_path / 'no-such-difftool'} {{parent}} {{branches}}",
        )


def test_invoked_tool_does_not_inherit_our_terminal(tmp_path: Path) -> None:
    script = tmp_path / "probe.py"
    out = tmp_path / "probe.json"
    script.write_text(
        "import json, os, sys\n"
        f"json.dump({{'sid': os.getsid(0), 'pid': os.getpid(),"
        f" 'stdin': os.path.realpath('/proc/self/fd/0')}}, open({str(out)!r}, 'w'))\n"
    )
    [proc] = EditorDetector.invoke(
        "custom", tmp_path, [tmp_path], custom_cmd=f"{sys.executable} {script} {{parent}}"
    )
    assert proc.wait(timeout=20) == 0
    info = json.loads(out.read_text())
    assert info["sid"] == info["pid"]  # its own session: Ctrl-C in forkdeck leaves it alone
    assert info["stdin"] == os.devnull
