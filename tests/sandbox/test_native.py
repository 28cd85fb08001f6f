"""The native executor's own edges: it is really used, bad requests are refused with a
clear setup error, a missing binary falls back (said once), and its source builds clean.

Isolation itself is tested by every command test, against both executors
(``conftest.executor``).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from branching_core.sandbox import SandboxedCommand, native, run_command
from branching_core.sandbox._spawn import TAG_SETUP, parse_record
from branching_core.sandbox.namespaces import plan_sandbox
from branching_core.sandbox.steps import SandboxStep
from tests.support.killed_child import REPO


def test_commands_start_through_the_executor_without_forking_us(
    ws: Path, built: Path, no_leftover: str
) -> None:
    with SandboxedCommand(f"sleep {no_leftover}", ws) as branch:
        with open(f"/proc/{branch.pid}/stat", "rb") as fh:
            stat = fh.read()
        # the name exec gave it (a fork of ours would be python's): readable by anyone
        assert stat[stat.index(b"(") + 1:stat.rindex(b")")] == built.name.encode()[:15]
        assert int(stat.rsplit(b")", 1)[1].split()[1]) == os.getpid()
        if os.geteuid() == 0:  # a normal user may not read the non-dumpable keeper's exe
            assert os.path.realpath(f"/proc/{branch.pid}/exe") == str(built.resolve())
    assert branch.exit_code == -signal.SIGKILL


def _s(value: str | int) -> bytes:
    data = str(value).encode()
    return struct.pack("<I", len(data)) + data


def _run_raw(binary: Path, request: bytes) -> tuple[int, bytes]:
    """Start the executor on ``request`` by hand; its exit code and result record."""
    memfd = os.memfd_create("forkdeck-test-request", os.MFD_CLOEXEC)
    os.write(memfd, request)
    r, w = os.pipe2(os.O_CLOEXEC)
    high = max(memfd, w) + 1
    try:
        pid = os.posix_spawn(str(binary), ["forkdeck-sandbox", str(high), str(high + 1)], {},
                             file_actions=[(os.POSIX_SPAWN_DUP2, memfd, high),
                                           (os.POSIX_SPAWN_DUP2, w, high + 1)])
    finally:
        os.close(memfd)
        os.close(w)
    with os.fdopen(r, "rb") as fh:
        record = fh.read()
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), record


def _valid_prefix(ws: Path) -> bytes:
    """A well-formed request up to (not including) its step count."""
    plan = dataclasses.replace(plan_sandbox(ws, network=False, mount_at=None), steps=())
    request = native.encode_request(plan, lifeline=0, userns=-1, mntns=-1, cgroup_procs=[],
                                    keep=[0, 1, 2], argv=["true"], env={})
    assert request.endswith(_s(0))
    return request[:-len(_s(0))]


@pytest.mark.parametrize(("build", "words"), [
    (lambda p: b"", "truncated"),
    (lambda p: _s("forkdeck-sandbox/0"), "not forkdeck-sandbox/1"),
    (lambda p: p + _s(1) + _s("rm_rf") + _s(-1) + _s("") + _s("") + _s(0), "unknown step rm_rf"),
    (lambda p: p + _s(1) + native.encode_step(SandboxStep("close", (99999,))),
     "bad slot in step close"),
    (lambda p: p + _s(1) + native.encode_step(SandboxStep("mkdir", ("/x", 0))).replace(
        _s(0), _s("0o7"), 1), "is no integer"),
    (lambda p: p + _s(0) + b"junk", "bytes left over"),
    (lambda p: p + _s(1_000_000), "bad count"),
    (lambda p: p + _s(1) + _s("mkdir") + b"\xff\xff\xff\x7f", "truncated"),
])
def test_a_malformed_request_is_a_clear_setup_error(ws: Path, built: Path, build, words: str
                                                     ) -> None:
    code, record = _run_raw(built, build(_valid_prefix(ws)))
    assert code == 125
    tag, parts = parse_record(record)
    assert tag == TAG_SETUP and parts[0] == b"namespace"
    message = parts[1].decode()
    assert message.startswith("malformed sandbox request") and words in message, message


FALLBACK = """\
import logging, sys
logging.basicConfig(level=logging.WARNING, format="LOG %(name)s %(message)s")
from branching_core.sandbox import run_command
for _ in range(3):
    r = run_command("echo ok; exit 3", sys.argv[1])
    print(r.exit_code, r.stdout.strip(), flush=True)
"""


def test_a_missing_binary_falls_back_to_python_and_says_so_once(ws: Path, tmp_path: Path
                                                                 ) -> None:
    env = {**os.environ, native.ENV_BINARY: str(tmp_path / "gone" / "forkdeck-sandbox")}
    env.pop(native.ENV_SWITCH, None)
    proc = subprocess.run([sys.executable, "-c", FALLBACK, str(ws)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["3 ok"] * 3
    notes = [line for line in proc.stderr.splitlines() if line.startswith("LOG ")]
    assert len(notes) == 1, proc.stderr
    assert "native sandbox unavailable" in notes[0] and "gone/forkdeck-sandbox" in notes[0]


def test_a_binary_that_cannot_execute_falls_back_too(ws: Path, tmp_path: Path) -> None:
    fake = tmp_path / "forkdeck-sandbox"
    fake.write_bytes(b"\x7fELF not really")
    fake.chmod(0o755)
    env = {**os.environ, native.ENV_BINARY: str(fake)}
    env.pop(native.ENV_SWITCH, None)
    proc = subprocess.run([sys.executable, "-c", FALLBACK, str(ws)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["3 ok"] * 3
    assert sum("native sandbox unavailable" in line for line in proc.stderr.splitlines()) == 1


def test_the_source_compiles_without_a_warning(tmp_path: Path) -> None:
    cc = shutil.which(os.environ.get("CC", "cc"))
    if cc is None:
        pytest.skip("no C compiler (cc) on this machine: the native executor cannot be built")
    source = Path(native.SOURCE)
    proc = subprocess.run([cc, "-O2", "-Wall", "-Wextra", "-Werror", "-o",
                           str(tmp_path / "forkdeck-sandbox"), str(source)],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def _mount_table(ws: Path) -> list[tuple[str, ...]]:
    """The sandbox's mounts as it sees them: root, mount point, options, type, source
    (device numbers and fd numbers in overlay options differ run to run)."""
    result = run_command("cat /proc/self/mountinfo", ws)
    assert result.exit_code == 0, result.stderr
    rows = []
    for line in result.stdout.splitlines():
        fields = line.split()
        sep = fields.index("-")
        rows.append((fields[3], fields[4], fields[5], fields[sep + 1], fields[sep + 2]))
    return rows


def test_both_executors_build_the_very_same_mount_table(
    ws: Path, built: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One compiled step list, two executors: what the command sees is identical."""
    native_table = _mount_table(ws)
    monkeypatch.setenv(native.ENV_SWITCH, "0")
    python_table = _mount_table(ws)
    assert len(native_table) > 20
    assert native_table == python_table
