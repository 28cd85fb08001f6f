"""The backend matrix: every semantic runs on every backend this machine supports.

The reflink backend needs btrfs or xfs; when the suite runs as root with btrfs-progs
installed, a small btrfs image is loop-mounted for the session so reflink runs for
real on an ext4 machine too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from branching_core.workspace.backends import BACKENDS
from branching_core.workspace.store import default_store_root


@pytest.fixture(scope="session")
def reflink_root() -> Iterator[Path | None]:
    """A directory on a reflink-capable filesystem, or None (with the reason skipped later)."""
    if os.geteuid() != 0 or shutil.which("mkfs.btrfs") is None:
        yield None
        return
    base = Path(tempfile.mkdtemp(prefix="forkdeck-btrfs-"))
    image, mount_point = base / "fs.img", base / "mnt"
    mount_point.mkdir()
    with open(image, "wb") as fh:
        fh.truncate(300 * 1024 * 1024)
    made = subprocess.run(["mkfs.btrfs", "-q", "-f", str(image)], capture_output=True, check=False)
    mounted = (
        made.returncode == 0
        and subprocess.run(
            ["mount", "-o", "loop", str(image), str(mount_point)], capture_output=True, check=False
        ).returncode
        == 0
    )
    try:
        yield mount_point if mounted else None
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(mount_point)], check=False)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(params=["overlay", "reflink", "copy"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return str(request.param)


@pytest.fixture
def fs_root(
    backend: str, tmp_path: Path, reflink_root: Path | None, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """Where this test's workspace lives: tmp, or the loop-mounted btrfs for reflink."""
    root = tmp_path
    if backend == "reflink" and reflink_root is not None:
        root = Path(tempfile.mkdtemp(dir=reflink_root))
        monkeypatch.setenv("FORKDECK_STORE", str(root / "_stores"))
    probe_ws = root / "_probe_ws"
    probe_ws.mkdir()
    store = default_store_root(probe_ws.resolve())
    store.mkdir(parents=True, exist_ok=True)
    reason = BACKENDS[backend].probe(probe_ws.resolve(), store)
    if reason:
        pytest.skip(f"{backend} backend unavailable here: {reason}")
    return root


@pytest.fixture
def ws_dir(fs_root: Path) -> Path:
    root = fs_root / "ws"
    root.mkdir()
    (root / "a.txt").write_text("a\n")
    (root / "sub").mkdir()
    (root / "sub" / "b.txt").write_text("b\n")
    return root
