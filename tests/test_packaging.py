"""The wheel a user installs (issue 24.2-24.4): built for real with ``pip wheel``.

It must fit every CPython 3.11+ (the native executor does not link Python, so not
``cp311-cp311``), carry a platform tag a public index accepts (a manylinux/musllinux tag,
never ``linux_x86_64``), hold only forkdeck's own top-level packages (no generic ``app``),
and ship the LICENSE, classifiers and a short description.
"""

from __future__ import annotations

import platform
import stat
import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.utils import parse_wheel_filename

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)],
        capture_output=True, text=True, timeout=600, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    (built,) = out.glob("forkdeck-*.whl")
    return built


def _metadata(wheel: Path) -> tuple[list[str], dict[str, list[str]], str]:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        message = Parser().parsestr(zf.read(meta_name).decode())
    headers: dict[str, list[str]] = {}
    for key, value in message.items():
        headers.setdefault(key, []).append(value)
    return names, headers, str(message.get_payload())


def test_the_wheel_is_tagged_for_any_python3_and_an_accepted_platform(wheel: Path) -> None:
    _, _, _, tags = parse_wheel_filename(wheel.name)
    assert {t.interpreter for t in tags} == {"py3"}
    assert {t.abi for t in tags} == {"none"}
    platforms = {t.platform for t in tags}
    arch = platform.machine()
    assert f"manylinux_2_17_{arch}" in platforms and f"musllinux_1_1_{arch}" in platforms
    assert not any(p.startswith("linux_") for p in platforms), platforms


@pytest.mark.parametrize(("python", "plat", "fits"), [
    ("3.11", "manylinux_2_17_x86_64", True),
    ("3.12", "manylinux_2_17_x86_64", True),
    ("3.13", "manylinux2014_x86_64", True),
    ("3.12", "musllinux_1_1_x86_64", True),
    ("3.12", "win_amd64", False),
])
def test_pip_accepts_it_for_every_python_it_claims(
    wheel: Path, tmp_path: Path, python: str, plat: str, fits: bool
) -> None:
    """pip's own tag matching, as `uv tool install --python 3.12` needs it (no install)."""
    if platform.machine() != "x86_64":
        pytest.skip("the platform cases are written for x86_64")
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--only-binary=:all:",
         "--target", str(tmp_path / "t"), "--python-version", python, "--platform", plat,
         str(wheel)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert (proc.returncode == 0) is fits, proc.stdout + proc.stderr
    if not fits:
        assert "is not a supported wheel" in proc.stderr


def test_the_wheel_holds_only_forkdeck_packages_and_the_executor(wheel: Path) -> None:
    names, _, _ = _metadata(wheel)
    top = {n.split("/", 1)[0] for n in names}
    assert top == {"branching_core", "forkdeck", wheel.name.split("-")[0] + "-"
                   + wheel.name.split("-")[1] + ".dist-info"}
    assert not any(n.startswith("app/") for n in names)
    assert "forkdeck/entry.py" in names and "forkdeck/__main__.py" in names
    assert any(n.startswith("forkdeck/") and n.endswith(".tcss") for n in names)
    with zipfile.ZipFile(wheel) as zf:
        info = zf.getinfo("branching_core/sandbox/native/forkdeck-sandbox")
        assert (info.external_attr >> 16) & stat.S_IXUSR, "the executor is executable"
        assert zf.read(info)[:4] == b"\x7fELF"


def test_license_classifiers_and_a_short_description(wheel: Path) -> None:
    names, headers, body = _metadata(wheel)
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    license_text = (REPO / "LICENSE").read_text()
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert "END OF TERMS AND CONDITIONS" in license_text  # the full text, not a pointer
    assert headers["License-Expression"] == ["Apache-2.0"]
    assert headers["Requires-Python"] == [">=3.11"]
    classifiers = headers["Classifier"]
    assert "Operating System :: POSIX :: Linux" in classifiers
    assert "Programming Language :: Python :: 3.12" in classifiers
    assert not any(c.startswith("License ::") for c in classifiers)  # PEP 639: the expression
    assert headers["Description-Content-Type"] == ["text/markdown"]
    assert body.strip() == (REPO / "docs" / "pypi.md").read_text().strip()
    assert len(body.splitlines()) < 60, "a short description, not the README"
    assert "docs" in headers["Provides-Extra"]
