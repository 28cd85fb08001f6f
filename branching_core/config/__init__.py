"""forkdeck's settings, persisted to ``<workspace>/.pydantic-deep/config.toml``.

Why a module of its own: the TUI's ``/fork-branches``, ``/fork-budget`` and ``/fork-model``
commands must survive restarts, and a hand-edited file with one typo must never cost the
user a session (or the rest of their file). So reading is forgiving and writing is careful:

* :func:`load_settings` never writes. A bad value falls back to the default *for that key
  only* and is reported as a :class:`ConfigProblem` (dotted key, reason, line); a TOML
  syntax error falls back to all defaults and is reported once, with its line.
* :class:`SettingsStore` mutators validate first (raising :class:`ConfigError`, one line,
  with the key, and touching nothing), then re-read the file, change one key and write the
  whole file atomically (:func:`branching_core.atomicio.atomic_write`, durable).

File format (every key is optional; an absent key means its default)::

    # forkdeck settings; rewritten by /fork-* commands (comments are not kept)
    [fork]
    branches = 2                      # branch count for the next /fork, 1..max_branches
    max_branches = 10                 # 1..100
    max_depth = 2                     # nested forks, 1..10
    per_branch_budget_usd = 0.25      # > 0, or absent for no budget
    aggregate_budget_usd = 2.0        # > 0, or absent for no budget
    keep_resolved = 20                # resolved forks kept in .pydantic-deep/forks, 0..10000
    approval_required = ["run_command", "write_file"]   # tools a branch runs only once
                                      # approved in the TUI ("*": every tool)

    [fork.models]                     # branch slot (1-based) -> "provider:model"
    1 = "anthropic:claude-opus-4-6"
    2 = "openrouter:openai/gpt-4.1"

    [fork.prices]                     # USD per million tokens, for unlisted models
    "qwen2.5-7b-instruct" = {input = 0.5, output = 1.5}
    # token_cap = 200000 (under [fork]): budget for a model with no price

    [model]
    default = "anthropic:claude-sonnet-4-5"   # "provider:name", "offline" / "test", or a
                                              # bare name when base_url is set
    base_url = "http://localhost:8080/v1"     # OpenAI-compatible server for every name
    openai_base_url = "http://localhost:8000/v1"   # where openai:NAME goes
    ollama_base_url = "http://localhost:11434/v1"  # where ollama:NAME goes
    api_key_env = "VLLM_API_KEY"              # env variable holding the server's key
                                              # (default FORKDECK_API_KEY)
    max_tokens = 4096                 # per request
    request_timeout = 300             # seconds for a whole request
    first_token_timeout = 120         # seconds until the first token
    max_concurrent_requests = 1       # 1 for a single-slot local server (default unlimited)

    [workspace]
    backend = "auto"                  # auto | overlay | reflink | copy
    keep_artifacts = false            # keep .pydantic-deep/forks/<id>/ after resolution

    [review]
    test_command = "pytest -q"
    test_timeout_s = 60.0             # > 0
    merge_strategy = "manual"         # manual | auto | auto_with_fallback | vote
    confidence_threshold = 0.8        # 0..1
    auto_tune_threshold = false       # tune confidence_threshold from the judge log
    difftool = "meld {parent} {branch}"   # see branching_core.review.editor

Keys this version does not know are reported as problems (so a typo such as
``brnaches`` is visible) but are kept when the file is rewritten: a newer forkdeck may
understand them.

What a mutator does to text it cannot keep: ``tomli_w`` has no round-trip mode, so a
rewrite keeps every key and value but not comments or layout. When the file on disk is
broken (TOML syntax error, not UTF-8, or a key whose type blocks the change, such as
``fork = 3``) or carries comments of the user's own, the mutator first copies the exact
bytes to ``config.toml.broken-<UTC timestamp>`` (broken) or ``config.toml.bak-<UTC
timestamp>`` (comments), then writes. The copy is returned in
:attr:`SaveResult.backup` and kept on :attr:`SettingsStore.last_backup`, so the UI can say
where the old text went. Nothing is ever deleted silently. A change to a broken file
carries over every value that still parses (the lines the parser rejects are left out,
see :mod:`branching_core.toml_salvage`), so one typo never costs the user the rest.

What is never touched: a ``config.toml`` (or ``.pydantic-deep/``) that is a symlink leading
outside the workspace is neither read (defaults, one problem) nor written nor backed up
(:class:`ConfigError`): a repository could ship ``config.toml -> ~/.bashrc``. A link that
stays inside the workspace is read and written through. A read-only ``config.toml``
(``chmod 444``) is the user's decision: mutators refuse with one line. Values nested
deeper than :data:`branching_core.toml_salvage.MAX_NESTING` levels are a problem for
that key (the parser and ``tomli_w`` recurse per level). Every write also leaves a
``.gitignore`` in ``.pydantic-deep/`` that ignores everything but ``config.toml``.

Pure stdlib + ``tomllib`` + ``tomli_w``: importing this package must stay cheap and must
not import pydantic-ai, textual, rich or the app. Three modules, one job each:
:mod:`~branching_core.config.schema` (the ``Settings`` fields and their validation),
:mod:`~branching_core.config.reading` (``load_settings``) and
:mod:`~branching_core.config.store` (``SettingsStore``, the careful writer).
"""

from __future__ import annotations

from branching_core.config.reading import config_path, load_settings
from branching_core.config.schema import (
    BACKEND_CHOICES,
    BARE_MODEL_NAMES,
    CONFIG_DIR,
    CONFIG_FILE,
    MERGE_STRATEGIES,
    BudgetKind,
    ConfigProblem,
    MergeStrategyName,
    SaveResult,
    Settings,
    SettingsLoad,
    settings_keys,
)
from branching_core.config.store import SettingsStore

__all__ = [
    "BACKEND_CHOICES",
    "BARE_MODEL_NAMES",
    "CONFIG_DIR",
    "CONFIG_FILE",
    "MERGE_STRATEGIES",
    "BudgetKind",
    "ConfigProblem",
    "MergeStrategyName",
    "SaveResult",
    "Settings",
    "SettingsLoad",
    "SettingsStore",
    "config_path",
    "load_settings",
    "settings_keys",
]
