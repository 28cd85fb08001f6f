"""Settings in ``.pydantic-deep/config.toml``: forgiving reads, careful atomic writes.

Every test works on a real file in a temporary workspace; nothing of ours is mocked.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from branching_core.config import (
    ConfigProblem,
    Settings,
    SettingsStore,
    config_path,
    load_settings,
)
from branching_core.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]


def write_config(root: Path, text: str) -> Path:
    path = config_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def read_doc(root: Path) -> dict:
    return tomllib.loads(config_path(root).read_text(encoding="utf-8"))


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` with its bytes: proves nothing changed on disk."""
    if not directory.exists():
        return {}
    return {
        str(p.relative_to(directory)): p.read_bytes() for p in directory.rglob("*") if p.is_file()
    }


def keys(problems: list[ConfigProblem]) -> list[str | None]:
    return [p.key for p in problems]


# --------------------------------------------------------------------------- loading


def test_missing_file_gives_defaults_and_creates_nothing(tmp_path: Path) -> None:
    load = load_settings(tmp_path)
    assert load.settings == Settings()
    assert load.problems == []
    assert load.exists is False
    assert load.path == tmp_path / ".pydantic-deep" / "config.toml"
    assert not (tmp_path / ".pydantic-deep").exists()


def test_defaults_are_the_documented_ones() -> None:
    s = Settings()
    assert (s.fork_branch_count, s.max_branches, s.max_depth) == (2, 10, 2)
    assert s.per_branch_budget_usd is None and s.aggregate_budget_usd is None
    assert s.branch_models == {} and s.model is None
    assert (s.backend, s.keep_artifacts, s.merge_strategy) == ("auto", False, "manual")
    assert (s.test_timeout_s, s.confidence_threshold) == (60.0, 0.8)
    assert s.test_command is None and s.difftool is None


def test_full_valid_file_is_read_into_typed_settings(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        """
[fork]
branches = 4
max_branches = 6
max_depth = 3
per_branch_budget_usd = 0.25
aggregate_budget_usd = 2

[fork.models]
1 = "anthropic:claude-opus-4-6"
2 = "openrouter:openai/gpt-4.1"
3 = "offline"

[model]
default = "anthropic:claude-sonnet-4-5"
openai_base_url = "http://localhost:8000/v1"
ollama_base_url = "http://127.0.0.1:11434/v1"

[workspace]
backend = "copy"
keep_artifacts = true

[review]
test_command = "pytest -q"
test_timeout_s = 30
merge_strategy = "auto_with_fallback"
confidence_threshold = 0.9
difftool = "meld {parent} {branch}"
""",
    )
    load = load_settings(tmp_path)
    assert load.problems == []
    s = load.settings
    assert s.fork_branch_count == 4 and s.max_branches == 6 and s.max_depth == 3
    assert s.per_branch_budget_usd == 0.25
    assert s.aggregate_budget_usd == 2.0 and isinstance(s.aggregate_budget_usd, float)
    assert s.branch_models == {
        1: "anthropic:claude-opus-4-6",
        2: "openrouter:openai/gpt-4.1",
        3: "offline",
    }
    assert s.model == "anthropic:claude-sonnet-4-5"
    assert s.model_for_branch(1) == "anthropic:claude-opus-4-6"
    assert s.model_for_branch(4) == "anthropic:claude-sonnet-4-5"
    assert s.openai_base_url == "http://localhost:8000/v1"
    assert s.ollama_base_url == "http://127.0.0.1:11434/v1"
    assert (s.backend, s.keep_artifacts) == ("copy", True)
    assert (s.test_command, s.test_timeout_s) == ("pytest -q", 30.0)
    assert (s.merge_strategy, s.confidence_threshold) == ("auto_with_fallback", 0.9)
    assert s.difftool == "meld {parent} {branch}"


def test_syntax_error_gives_defaults_one_problem_with_line_and_leaves_file(
    tmp_path: Path,
) -> None:
    text = "[fork]\nbranches = 3\nper_branch_budget_usd = = 1\n"
    path = write_config(tmp_path, text)
    before = snapshot(path.parent)
    load = load_settings(tmp_path)
    assert load.settings == Settings()
    assert len(load.problems) == 1
    problem = load.problems[0]
    assert problem.key is None
    assert problem.line == 3
    assert "syntax" in problem.reason
    assert "\n" not in problem.message and problem.message.startswith("config.toml line 3:")
    assert snapshot(path.parent) == before


def test_invalid_utf8_is_one_problem_and_defaults(tmp_path: Path) -> None:
    path = config_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"[fork]\nbranches = 3\n# \xff\xfe\n")
    load = load_settings(tmp_path)
    assert load.settings == Settings()
    assert len(load.problems) == 1 and "UTF-8" in load.problems[0].reason


@pytest.mark.parametrize(
    ("toml", "key", "fragment"),
    [
        ("[fork]\nbranches = 0", "fork.branches", "between 1 and 100"),
        ("[fork]\nbranches = 11", "fork.branches", "fork.max_branches (10)"),
        ("[fork]\nbranches = true", "fork.branches", "expected an integer"),
        ("[fork]\nbranches = 2.5", "fork.branches", "expected an integer"),
        ('[fork]\nbranches = "3"', "fork.branches", "expected an integer"),
        ("[fork]\nmax_branches = 0", "fork.max_branches", "between 1 and 100"),
        ("[fork]\nmax_depth = 99", "fork.max_depth", "between 1 and 10"),
        ("[fork]\nper_branch_budget_usd = 0", "fork.per_branch_budget_usd", "greater than 0"),
        ("[fork]\naggregate_budget_usd = -2.5", "fork.aggregate_budget_usd", "greater than 0"),
        ("[fork]\naggregate_budget_usd = nan", "fork.aggregate_budget_usd", "finite"),
        ("[fork]\nper_branch_budget_usd = inf", "fork.per_branch_budget_usd", "finite"),
        ('[model]\ndefault = "gpt-4o"', "model.default", "provider prefix"),
        ('[model]\nopenai_base_url = "localhost:8000"', "model.openai_base_url", "http(s) URL"),
        ('[workspace]\nbackend = "zfs"', "workspace.backend", "one of auto, overlay"),
        ('[workspace]\nkeep_artifacts = "yes"', "workspace.keep_artifacts", "true or false"),
        ("[review]\ntest_timeout_s = 0", "review.test_timeout_s", "greater than 0"),
        ('[review]\nmerge_strategy = "best"', "review.merge_strategy", "one of manual"),
        ("[review]\nconfidence_threshold = 1.5", "review.confidence_threshold", "between 0"),
        ('[review]\ntest_command = ""', "review.test_command", "must not be empty"),
        ("[review]\ndifftool = 'meld \"{parent}'", "review.difftool", "cannot be split"),
        ('[fork.models]\n1 = "claude"', "fork.models.1", "provider prefix"),
        ('[fork.models]\n0 = "anthropic:x"', "fork.models.0", "between 1 and 10"),
        ('[fork.models]\nfirst = "anthropic:x"', "fork.models.first", "whole number"),
        ("[fork]\nmodels = 3", "fork.models", "expected a table"),
        ("fork = 3", "fork", "expected a table"),
    ],
)
def test_each_bad_value_falls_back_for_that_key_only(
    tmp_path: Path, toml: str, key: str, fragment: str
) -> None:
    # A valid neighbour in another table proves the rest of the file still counts.
    good = '\n[model]\nollama_base_url = "http://h:1/v1"\n' if "[model]" not in toml else ""
    write_config(tmp_path, toml + "\n" + good)
    load = load_settings(tmp_path)
    matching = [p for p in load.problems if p.key == key]
    assert len(matching) == 1, load.problems
    assert fragment in matching[0].reason
    assert matching[0].line is not None
    assert "\n" not in matching[0].message
    attr_defaults = Settings()
    for name in ("fork_branch_count", "max_branches", "max_depth", "backend", "merge_strategy"):
        assert getattr(load.settings, name) == getattr(attr_defaults, name)
    if good:
        assert load.settings.ollama_base_url == "http://h:1/v1"


def test_bad_keys_do_not_spoil_good_ones_in_the_same_table(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        "[fork]\nbranches = 3\nmax_depth = 0\nper_branch_budget_usd = 0.5\n"
        '[fork.models]\n1 = "nope"\n2 = "anthropic:claude-opus-4-6"\n',
    )
    load = load_settings(tmp_path)
    assert keys(load.problems) == ["fork.max_depth", "fork.models.1"]
    assert [p.line for p in load.problems] == [3, 6]
    s = load.settings
    assert s.fork_branch_count == 3 and s.max_depth == 2 and s.per_branch_budget_usd == 0.5
    assert s.branch_models == {2: "anthropic:claude-opus-4-6"}


def test_branch_count_falls_back_within_a_small_max(tmp_path: Path) -> None:
    write_config(tmp_path, "[fork]\nmax_branches = 1\nbranches = 5\n")
    load = load_settings(tmp_path)
    assert keys(load.problems) == ["fork.branches"]
    assert load.settings.max_branches == 1
    assert load.settings.fork_branch_count == 1  # the default 2 would be out of range


def test_unknown_keys_are_reported_without_invalidating_others(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        'brnaches = 3\n[fork]\nbranches = 3\nfuture_knob = "x"\n[plugins]\nenabled = true\n',
    )
    load = load_settings(tmp_path)
    assert keys(load.problems) == ["brnaches", "fork.future_knob", "plugins"]
    assert all("unknown setting" in p.reason for p in load.problems)
    assert load.settings.fork_branch_count == 3


def test_load_never_writes_even_a_broken_file(tmp_path: Path) -> None:
    path = write_config(tmp_path, "[fork\nbranches = 3\n")
    before = snapshot(path.parent)
    mtime = path.stat().st_mtime_ns
    for _ in range(3):
        load_settings(tmp_path)
        SettingsStore(tmp_path)
    assert snapshot(path.parent) == before
    assert path.stat().st_mtime_ns == mtime


def test_unreadable_config_is_a_problem_and_mutators_refuse(tmp_path: Path) -> None:
    # A directory where the file should be: reading fails with an OS error.
    config_path(tmp_path).mkdir(parents=True)
    store = SettingsStore(tmp_path)
    assert store.settings == Settings()
    assert len(store.problems) == 1 and "cannot read" in store.problems[0].reason
    with pytest.raises(ConfigError) as info:
        store.set_branch_count(3)
    assert "\n" not in str(info.value)
    assert config_path(tmp_path).is_dir()


# --------------------------------------------------------------------------- writing


def test_fork_commands_write_through_and_survive_a_restart(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path)
    result = store.set_branch_count(4)
    assert result.path == config_path(tmp_path) and result.backup is None
    store.set_budget("per-branch", 0.25)
    store.set_budget("aggregate", "2.00")
    store.set_branch_model(1, "anthropic:claude-opus-4-6")
    store.set_branch_model("2", "openrouter:openai/gpt-4.1")

    assert read_doc(tmp_path) == {
        "fork": {
            "branches": 4,
            "per_branch_budget_usd": 0.25,
            "aggregate_budget_usd": 2.0,
            "models": {"1": "anthropic:claude-opus-4-6", "2": "openrouter:openai/gpt-4.1"},
        }
    }
    restarted = SettingsStore(tmp_path)
    assert restarted.problems == []
    s = restarted.settings
    assert s.fork_branch_count == 4
    assert (s.per_branch_budget_usd, s.aggregate_budget_usd) == (0.25, 2.0)
    assert s.branch_models == {1: "anthropic:claude-opus-4-6", 2: "openrouter:openai/gpt-4.1"}
    assert store.settings == s  # the writer's own view is refreshed too


def test_clear_commands_remove_keys_and_empty_tables(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path)
    store.set_branch_count(3)
    store.set_budget("per-branch", 1)
    store.set_budget("aggregate", 5)
    store.set_branch_model(1, "anthropic:a")
    store.set_branch_model(3, "openai:b")

    store.clear_branch_model(1)
    assert store.settings.branch_models == {3: "openai:b"}
    store.clear_budgets()
    assert store.settings.per_branch_budget_usd is None
    assert store.settings.aggregate_budget_usd is None
    store.clear_branch_models()
    assert store.settings.branch_models == {}
    assert read_doc(tmp_path) == {"fork": {"branches": 3}}

    store.set_budget("aggregate", 4)
    store.set_budget("aggregate", None)  # clearing one budget only
    assert read_doc(tmp_path) == {"fork": {"branches": 3}}


def test_generic_set_accepts_dotted_keys_attribute_names_and_text(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path)
    store.set("review.test_timeout_s", "30")
    store.set("keep_artifacts", "true")
    store.set("workspace.backend", "reflink")
    store.set("model", "anthropic:claude-sonnet-4-5")
    store.set("review.test_command", "pytest -q -x")
    store.set("review.confidence_threshold", 0.75)
    store.set("fork.models.2", "offline")
    s = store.settings
    assert s.test_timeout_s == 30.0 and s.keep_artifacts is True and s.backend == "reflink"
    assert s.model == "anthropic:claude-sonnet-4-5" and s.test_command == "pytest -q -x"
    assert s.confidence_threshold == 0.75 and s.branch_models == {2: "offline"}
    assert read_doc(tmp_path)["workspace"] == {"keep_artifacts": True, "backend": "reflink"}

    store.set("workspace.backend", None)  # back to the default: the key goes away
    assert "backend" not in read_doc(tmp_path)["workspace"]
    assert store.settings.backend == "auto"


@pytest.mark.parametrize(
    ("call", "key"),
    [
        (lambda s: s.set_branch_count(0), "fork.branches"),
        (lambda s: s.set_branch_count(11), "fork.branches"),
        (lambda s: s.set_branch_count("many"), "fork.branches"),
        (lambda s: s.set_branch_count(True), "fork.branches"),
        (lambda s: s.set_budget("per-branch", 0), "fork.per_branch_budget_usd"),
        (lambda s: s.set_budget("aggregate", "-1"), "fork.aggregate_budget_usd"),
        (lambda s: s.set_budget("aggregate", "lots"), "fork.aggregate_budget_usd"),
        (lambda s: s.set_budget("per-branch", float("nan")), "fork.per_branch_budget_usd"),
        (lambda s: s.set_budget("weekly", 1), "fork.budget"),
        (lambda s: s.set_branch_model(1, "claude-opus"), "fork.models.1"),
        (lambda s: s.set_branch_model(3, "anthropic:x"), "fork.models.3"),  # > branch count 2
        (lambda s: s.set_branch_model(0, "anthropic:x"), "fork.models.0"),
        (lambda s: s.set("workspace.backend", "zfs"), "workspace.backend"),
        (lambda s: s.set("review.merge_strategy", "coin"), "review.merge_strategy"),
        (lambda s: s.set("review.confidence_threshold", 2), "review.confidence_threshold"),
        (lambda s: s.set("model.ollama_base_url", "ftp://x"), "model.ollama_base_url"),
        (lambda s: s.set("workspace.keep_artifacts", "maybe"), "workspace.keep_artifacts"),
        (lambda s: s.set("review.difftool", "meld 'a"), "review.difftool"),
        (lambda s: s.set("fork.max_depth", 0), "fork.max_depth"),
        (lambda s: s.set("no.such.key", 1), "no.such.key"),
    ],
)
def test_invalid_changes_raise_one_line_config_error_and_touch_nothing(
    tmp_path: Path, call, key: str
) -> None:
    path = write_config(tmp_path, "[review]\ntest_command = 'make test'\n")
    before = snapshot(path.parent)
    mtime = path.stat().st_mtime_ns
    store = SettingsStore(tmp_path)
    with pytest.raises(ConfigError) as info:
        call(store)
    error = info.value
    assert error.key == key
    assert error.path == str(path)
    assert "\n" not in str(error) and str(error)
    assert snapshot(path.parent) == before
    assert path.stat().st_mtime_ns == mtime
    assert store.settings.test_command == "make test"


def test_lowering_max_branches_below_the_count_names_both(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path)
    store.set_branch_count(5)
    with pytest.raises(ConfigError) as info:
        store.set("fork.max_branches", 3)
    assert info.value.key == "fork.max_branches"
    assert "fork.branches" in str(info.value) and "got 5" in str(info.value)
    store.set_branch_count(2)
    store.set("fork.max_branches", 3)
    assert store.settings.max_branches == 3


def test_write_is_atomic_leaves_no_temp_files_and_keeps_mode(tmp_path: Path) -> None:
    path = write_config(tmp_path, "[fork]\nbranches = 3\n")
    os.chmod(path, 0o600)
    store = SettingsStore(tmp_path)
    for n in (4, 5, 6):
        store.set_branch_count(n)
    assert sorted(p.name for p in path.parent.iterdir()) == [".gitignore", "config.toml"]
    assert path.stat().st_mode & 0o777 == 0o600
    assert read_doc(tmp_path) == {"fork": {"branches": 6}}


def test_failed_write_raises_config_error_and_changes_nothing(tmp_path: Path) -> None:
    # .pydantic-deep is a plain file, so the config directory cannot be created.
    blocker = tmp_path / ".pydantic-deep"
    blocker.write_text("not a directory")
    store = SettingsStore(tmp_path)
    with pytest.raises(ConfigError) as info:
        store.set_branch_count(3)
    assert "cannot" in str(info.value) and "\n" not in str(info.value)
    assert blocker.read_text() == "not a directory"
    assert store.settings == Settings()


def test_unknown_and_invalid_keys_are_preserved_on_rewrite(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        'top_level_thing = "keep me"\n'
        "[fork]\nbranches = 2\nfuture_knob = [1, 2]\nmax_depth = 0\n"
        "[plugins.lint]\nenabled = true\n",
    )
    store = SettingsStore(tmp_path)
    store.set_branch_count(3)
    doc = read_doc(tmp_path)
    assert doc["top_level_thing"] == "keep me"
    assert doc["fork"] == {"branches": 3, "future_knob": [1, 2], "max_depth": 0}
    assert doc["plugins"] == {"lint": {"enabled": True}}
    # The invalid value stays the user's to fix, and stays reported.
    assert keys(store.problems) == [
        "top_level_thing",
        "fork.future_knob",
        "fork.max_depth",
        "plugins",
    ]


def test_mutator_on_syntax_broken_file_keeps_exact_backup(tmp_path: Path) -> None:
    broken = b"[fork]\nbranches = 4\nper_branch_budget_usd = = 0.5  # oops\n"
    path = config_path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_bytes(broken)
    store = SettingsStore(tmp_path)
    assert store.settings == Settings() and store.problems[0].line == 3

    result = store.set_branch_count(3)
    assert result.backup is not None
    assert result.backup.name.startswith("config.toml.broken-")
    assert result.backup.parent == path.parent
    assert result.backup.read_bytes() == broken
    assert store.last_backup == result.backup
    assert read_doc(tmp_path) == {"fork": {"branches": 3}}
    assert store.problems == []

    # A second broken file the same second gets its own copy, never overwriting the first.
    path.write_bytes(b"[[[")
    store.reload()
    second = store.set_branch_count(2).backup
    assert second is not None and second != result.backup
    assert second.read_bytes() == b"[[[" and result.backup.read_bytes() == broken


def test_mutator_replacing_a_mistyped_table_keeps_a_backup(tmp_path: Path) -> None:
    path = write_config(tmp_path, 'fork = "three"\n[review]\ntest_command = "make"\n')
    original = path.read_bytes()
    store = SettingsStore(tmp_path)
    result = store.set_branch_count(3)
    assert result.backup is not None and result.backup.read_bytes() == original
    assert read_doc(tmp_path) == {"fork": {"branches": 3}, "review": {"test_command": "make"}}


def test_user_comments_are_backed_up_once_then_not_again(tmp_path: Path) -> None:
    original = "# my careful notes\n[fork]\nbranches = 3 \n"
    path = write_config(tmp_path, original)
    store = SettingsStore(tmp_path)
    first = store.set_branch_count(4)
    assert first.backup is not None and first.backup.name.startswith("config.toml.bak-")
    assert first.backup.read_text() == original
    second = store.set_branch_count(5)
    assert second.backup is None  # only our own header comment is left
    assert path.read_text().startswith("# forkdeck settings")


def test_a_file_written_by_the_previous_header_is_not_backed_up(tmp_path: Path) -> None:
    # config.py became a package, so the header's pointer changed; files written with the
    # old header hold no comment of the user's own and must not be backed up.
    old = (
        "# forkdeck settings; rewritten by /fork-* commands (comments are not kept).\n"
        "# Format: see the docstring of branching_core/config.py.\n\n[fork]\nbranches = 3\n"
    )
    path = write_config(tmp_path, old)
    result = SettingsStore(tmp_path).set_branch_count(4)
    assert result.backup is None
    assert "branching_core/config/__init__.py" in path.read_text()


def test_mutators_reread_the_file_so_hand_edits_are_kept(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path)
    store.set_branch_count(3)
    # The user edits the file in an editor while the TUI is running.
    doc_text = config_path(tmp_path).read_text() + '\n[review]\ntest_command = "tox"\n'
    config_path(tmp_path).write_text(doc_text)
    store.set_budget("aggregate", 1.5)
    assert read_doc(tmp_path)["review"] == {"test_command": "tox"}
    assert store.settings.test_command == "tox"
    assert store.settings.aggregate_budget_usd == 1.5


def test_symlinked_config_inside_the_workspace_is_written_through_the_link(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    (ws / "configs").mkdir(parents=True)
    real = ws / "configs" / "forkdeck.toml"
    real.write_text("[fork]\nbranches = 2\n")
    link = config_path(ws)
    link.parent.mkdir(parents=True)
    link.symlink_to("../configs/forkdeck.toml")
    SettingsStore(ws).set_branch_count(3)
    assert link.is_symlink()
    assert tomllib.loads(real.read_text()) == {"fork": {"branches": 3}}


def test_written_file_parses_with_tomllib_and_has_the_documented_tables(tmp_path: Path) -> None:
    store = SettingsStore(tmp_path)
    store.set("model.default", "anthropic:claude-sonnet-4-5")
    store.set("review.merge_strategy", "vote")
    store.set("workspace.backend", "copy")
    store.set_branch_count(3)
    text = config_path(tmp_path).read_text()
    assert text.index("[fork]") < text.index("[model]") < text.index("[workspace]")
    assert text.index("[workspace]") < text.index("[review]")
    assert load_settings(tmp_path).problems == []


def test_importing_config_does_not_pull_in_heavy_or_ui_modules() -> None:
    code = (
        "import sys, branching_core.config\n"
        "bad = [m for m in ('pydantic_ai', 'textual', 'rich', 'forkdeck', 'pydantic')"
        " if m in sys.modules]\n"
        "print(bad)\n"
        "sys.exit(1 if bad else 0)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "[]"


def test_lazy_public_names_resolve() -> None:
    import branching_core

    assert branching_core.Settings is Settings
    assert branching_core.load_settings is load_settings
