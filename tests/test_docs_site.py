"""The documentation (issue 24.16): a short README that a newcomer reads first, and a
MkDocs site that builds with ``--strict`` (no broken link, image or nav entry)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
CI_MARKER = "# --- the README's test command, verbatim"


def test_the_site_builds_strict(tmp_path: Path) -> None:
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("the docs extra is not installed: pip install -e '.[docs]'")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
        cwd=REPO, capture_output=True, text=True, timeout=300, env=env, check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    site = tmp_path / "site"
    for page in ("install", "tui", "models", "forking", "patterns", "cli", "cluster",
                 "reviewing", "settings", "reliability-overview", "architecture", "benchmarks"):
        assert (site / page / "index.html").exists(), page
    # Screenshots reach the site through docs/screenshots -> ../screenshots.
    assert (site / "screenshots" / "three_branches_running.svg").exists()


def test_the_readme_is_short_and_has_what_a_newcomer_needs() -> None:
    assert len(README.splitlines()) <= 300
    for heading in ("## Install", "## Quickstart", "## Keys", "## Documentation"):
        assert heading in README, heading
    for must in ("pipx install .", "uv tool install .", "python3 -m venv", "python3-venv",
                 "forkdeck demo", "forkdeck models", "/fork", "/merge", ">>",
                 "forkdeck mcp", "forkdeck agents", "forkdeck --help"):
        assert must in README, must


def test_every_relative_link_and_image_in_the_readme_exists() -> None:
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    local = [t for t in targets if "://" not in t]
    assert any(t.startswith("screenshots/") for t in local), "a screenshot"
    missing = [t for t in local if not (REPO / t).exists()]
    assert missing == []


def test_ci_runs_the_readmes_test_command_verbatim() -> None:
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    marker = next(i for i, line in enumerate(ci) if line.startswith(CI_MARKER))
    ci_command = ci[marker + 1].strip()
    block = README.split("## Development", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    assert block.strip() == ci_command
    assert "mkdocs build --strict" in ci_command and "pytest" in ci_command
    assert "\n" not in block.strip(), "one line"
