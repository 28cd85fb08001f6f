"""Secrets are masked by default, even for a root caller ("decide and document" item of
issue 12): /etc/shadow, /root, the caller's home and credential files; the workspace,
the caller's virtualenv and ~/.gitconfig stay reachable; expose_secrets=True opts in."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from branching_core.sandbox import masks, run_command
from tests.support.killed_child import REPO

# Every test runs against the native executor and the Python path (conftest.executor).
pytestmark = [pytest.mark.usefixtures("executor"),
              pytest.mark.skipif(os.geteuid() != 0, reason="the root-caller case needs root")]


@pytest.fixture
def fake_home(sandbox_ok: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A HOME outside /tmp (which the sandbox hides anyway) with secrets and a project."""
    base = Path(f"/var/tmp/forkdeck-secrets-{secrets.token_hex(4)}")
    home = base / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n")
    (home / "notes.txt").write_text("private notes\n")
    (home / ".netrc").write_text("machine x password hunter2\n")
    (home / ".gitconfig").write_text("[user]\n\tname = Sandboxed\n")
    for secret in (home / ".ssh" / "id_ed25519", home / "notes.txt", home / ".netrc"):
        secret.chmod(0o600)
    (home / "project").mkdir()
    monkeypatch.setenv("HOME", str(home))
    yield home
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def root_secret() -> Iterator[Path]:
    path = Path(f"/root/forkdeck-secret-{secrets.token_hex(4)}.txt")
    path.write_text("root's secret\n")
    path.chmod(0o600)
    yield path
    path.unlink(missing_ok=True)


def test_secrets_are_masked_for_a_root_caller(fake_home: Path, root_secret: Path) -> None:
    project = fake_home / "project"
    secrets_to_try = ["/etc/shadow", "/etc/gshadow", str(root_secret),
                      f"{fake_home}/notes.txt", f"{fake_home}/.ssh/id_ed25519",
                      f"{fake_home}/.netrc"]
    for path in secrets_to_try:
        ran = run_command(["cat", path], project)
        assert ran.exit_code != 0 and ran.stdout == "", f"{path} was readable: {ran.stdout!r}"
    ran = run_command("echo work > made.txt && cat made.txt && cat ~/.gitconfig", project)
    assert ran.exit_code == 0, ran.stderr
    assert ran.stdout == "work\n[user]\n\tname = Sandboxed\n"
    assert (project / "made.txt").read_text() == "work\n"


def test_expose_secrets_opts_in(fake_home: Path, root_secret: Path) -> None:
    ran = run_command(["cat", str(root_secret), f"{fake_home}/notes.txt"], fake_home / "project",
                      expose_secrets=True)
    assert ran.stdout == "root's secret\nprivate notes\n", ran.stderr


CALLER = r'''
import sys
from branching_core.sandbox import run_command
r = run_command([sys.executable, "-c", "import sys, json; print(sys.prefix)"], sys.argv[1])
leak = run_command(["cat", sys.argv[2]], sys.argv[1])
print(r.exit_code, r.stdout.strip(), r.stderr.strip()[-200:], "|", leak.exit_code, leak.stdout)
'''


def test_a_virtualenv_inside_the_masked_home_still_runs(fake_home: Path) -> None:
    venv = fake_home / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    env = {**os.environ, "PYTHONPATH": str(REPO), "HOME": str(fake_home)}
    proc = subprocess.run(
        [str(venv / "bin" / "python"), "-c", CALLER, str(fake_home / "project"),
         str(fake_home / "notes.txt")],
        env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    code, prefix, *_rest = proc.stdout.split()
    assert code == "0" and prefix == str(venv), proc.stdout
    assert proc.stdout.rstrip().endswith("| 1"), f"the home was readable: {proc.stdout}"


# The caller caches the secret masks (masks.secret_masks); a secret that appears after
# a cached plan must still be masked. _RACY_NS=0 lets the cache take a result right
# after the test touched a directory; the sleeps only let a later change get a later
# timestamp.
def _cached_masks() -> masks.SecretMasks:
    for _ in range(50):  # other sessions' tests add homes under /home now and then
        first = masks.secret_masks()
        if masks.secret_masks() is first:
            return first
        time.sleep(0.05)
    raise AssertionError("the secret masks were never reused")


def test_a_credential_file_made_after_a_cached_plan_is_masked(
        fake_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(masks, "_RACY_NS", 0)
    creds = fake_home.parent / "creds" / "service.json"
    creds.parent.mkdir()
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(creds))
    assert str(creds) not in _cached_masks().files
    time.sleep(0.05)
    creds.write_text("CLOUD KEY\n")
    assert str(creds) in masks.secret_masks().files
    ran = run_command(["cat", str(creds)], fake_home / "project")
    assert ran.exit_code != 0 and "CLOUD KEY" not in ran.stdout


def test_a_home_made_after_a_cached_plan_is_masked(fake_home: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(masks, "_RACY_NS", 0)
    new_home = Path(f"/home/forkdeck-masks-{secrets.token_hex(4)}")
    assert str(new_home) not in _cached_masks().dirs
    time.sleep(0.05)
    new_home.mkdir()
    try:
        (new_home / "diary.txt").write_text("PRIVATE\n")
        assert str(new_home) in masks.secret_masks().dirs
        ran = run_command(["cat", str(new_home / "diary.txt")], fake_home / "project")
        assert "PRIVATE" not in ran.stdout
    finally:
        shutil.rmtree(new_home, ignore_errors=True)


@pytest.mark.parametrize(("line", "userdb_present", "files_only"), [
    ("passwd: files", False, True),
    ("passwd: compat", True, True),
    ("passwd: files systemd", False, True),  # nss-systemd adds only root and nobody then
    ("passwd: files systemd", True, False),  # a userdb place exists: ask the database
    ("passwd: files ldap", False, False),
    ("passwd: files systemd sss", False, False),
])
def test_when_the_password_file_alone_decides_the_homes(
    tmp_path: Path, line: str, userdb_present: bool, files_only: bool
) -> None:
    nsswitch = tmp_path / "nsswitch.conf"
    nsswitch.write_text(f"# generated\n{line}  # comment\ngroup: files\n")
    assert masks._passwd_files_only(userdb_present, str(nsswitch)) is files_only


def test_a_userdb_place_appearing_invalidates_the_cached_masks(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The cached masks record the userdb places' absence; one appearing is a change."""
    place = tmp_path / "userdb"
    monkeypatch.setattr(masks, "USERDB_PLACES", (*masks.USERDB_PLACES, str(place)))
    monkeypatch.setattr(masks, "_RACY_NS", -10**18)  # cache even what changed just now
    masks._masks_cache.clear()
    masks.secret_masks()
    cached = list(masks._masks_cache.values())
    if not cached or str(place) not in cached[0].deps:
        pytest.skip("the masks are not cached from the password file alone on this host"
                    " (a symlinked home, or a passwd source besides files and systemd)")
    assert cached[0].still_valid()
    place.mkdir()
    assert not cached[0].still_valid()
