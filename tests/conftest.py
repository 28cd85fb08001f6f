"""Suite-wide fixtures: every test gets its own branch store beside its tmp dir."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _isolated_branch_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Keep branch stores out of the user's cache and on the tmp filesystem."""
    store = tmp_path / "_stores"
    monkeypatch.setenv("FORKDECK_STORE", str(store))
    return store


@pytest.fixture(autouse=True)
def _process_network_policy() -> Iterator[None]:
    """Each test starts from the default ``private`` policy: a front door run in-process
    (``cli.main``, a ChatSession) makes its config's policy the process-wide one, as it
    should for a real one-command process, and it must not leak into the next test."""
    from branching_core.sandbox.network import policy, set_policy

    before = policy()
    yield
    set_policy(before)


# -- CI guard: a capability the machine has must not be skipped ---------------------------

# FORKDECK_REQUIRE names capabilities (space- or comma-separated) that this machine is known to
# have; a skip whose reason says one of them is unavailable then fails the run instead of
# hiding a broken backend or sandbox behind a green "skipped". .ci/run sets it.
_CAPABILITY_SKIP_MARKERS: dict[str, tuple[str, ...]] = {
    "overlay": ("overlay backend unavailable",),
    "reflink": ("reflink backend unavailable", "btrfs"),
    "copy": ("copy backend unavailable",),
    "sandbox": ("sandbox unavailable", "no sandbox here", "sandbox cannot run"),
    "cgroups": ("cgroup",),
    "tmux": ("tmux",),
    "unprivileged": ("uid 65534", "setpriv"),
    "ray": ("ray extra is not installed",),
    # Sandboxed commands start through the native executor built at install (setup.py).
    "native": ("native executor not built", "no c compiler"),
    # Real third-party agent CLIs raced in branches (tests/external/test_claude_code.py,
    # test_codex.py); .ci/run installs both from npm.
    "claude-code": ("claude code cli not installed",),
    "codex": ("codex cli not installed",),
    "netstack": ("user-mode network stack unavailable",),  # pasta / slirp4netns
    "postgres": ("postgresql not installed",),
}


def _required_capabilities() -> set[str]:
    raw = os.environ.get("FORKDECK_REQUIRE", "")
    wanted = {name for name in raw.replace(",", " ").split() if name}
    unknown = wanted - set(_CAPABILITY_SKIP_MARKERS)
    if unknown:
        raise pytest.UsageError(f"FORKDECK_REQUIRE names unknown capabilities: {sorted(unknown)}")
    return wanted


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Turn the skip of a required capability into a failure that quotes the skip's reason."""
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    required = _required_capabilities() if report.skipped else set()
    if not required:
        return
    longrepr = report.longrepr
    reason = str(longrepr[-1]) if isinstance(longrepr, tuple) else str(longrepr)
    lowered = reason.lower()
    for name in sorted(required):
        if any(marker.lower() in lowered for marker in _CAPABILITY_SKIP_MARKERS[name]):
            report.outcome = "failed"
            report.longrepr = f"required capability {name!r} was skipped: {reason}"
            return
