"""Build hook: compile the native sandbox executor into the package.

Everything else is declared in pyproject.toml. Sandboxed commands start through a
small C program (branching_core/sandbox/native/forkdeck_sandbox.c); it is built here,
with the C compiler (``$CC``, else ``cc``), for both regular installs and wheels (into
the build directory) and editable installs (into the source tree, where the editable
package is imported from). Without a compiler the install still succeeds with a
warning, and commands take the slower Python path (logged once at run time).
"""

from __future__ import annotations

import os
import shlex
import struct
import subprocess
import sys
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

try:  # setuptools >= 70.1 ships bdist_wheel; older ones take it from the wheel package
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # pragma: no cover
    from wheel.bdist_wheel import bdist_wheel  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent
NATIVE = Path("branching_core") / "sandbox" / "native"
SOURCE = ROOT / NATIVE / "forkdeck_sandbox.c"
BINARY = "forkdeck-sandbox"


def compile_executor(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / BINARY
    tmp = out_dir / f".{BINARY}.{os.getpid()}"
    cc = shlex.split(os.environ.get("CC", "cc"))
    cmd = [*cc, "-O2", "-Wall", "-Wextra", "-o", str(tmp), str(SOURCE)]
    # Static when the C library allows it: no dynamic loading at every sandbox start.
    for attempt in ([*cmd, "-static"], cmd):
        try:
            subprocess.run(attempt, check=True, stderr=subprocess.DEVNULL
                           if attempt is not cmd else None)
            break
        except (OSError, subprocess.CalledProcessError) as exc:
            tmp.unlink(missing_ok=True)
            error = exc
    else:
        print(f"WARNING: forkdeck's native sandbox was not built ({shlex.join(cmd)}: {error});"
              " sandboxed commands will take the slower Python path", file=sys.stderr)
        return
    tmp.chmod(0o755)
    tmp.replace(target)  # atomic: a running forkdeck never sees half a binary


class BuildPyWithExecutor(build_py):
    """build_py, plus the executor beside its source (editable) or in build_lib."""

    def run(self) -> None:
        super().run()
        editable = getattr(self, "editable_mode", False)
        compile_executor(ROOT / NATIVE if editable else Path(self.build_lib) / NATIVE)


def elf_is_static(path: Path) -> bool:
    """True when the ELF executable at ``path`` names no program interpreter (PT_INTERP):
    then it needs no C library at run time, whichever the host has."""
    data = path.read_bytes()
    if data[:4] != b"\x7fELF":
        return False
    wide, order = data[4] == 2, "<" if data[5] == 1 else ">"
    if wide:
        (phoff,) = struct.unpack_from(order + "Q", data, 0x20)
        phentsize, phnum = struct.unpack_from(order + "HH", data, 0x36)
    else:
        (phoff,) = struct.unpack_from(order + "I", data, 0x1C)
        phentsize, phnum = struct.unpack_from(order + "HH", data, 0x2A)
    PT_INTERP = 3
    return all(struct.unpack_from(order + "I", data, phoff + i * phentsize)[0] != PT_INTERP
               for i in range(phnum))


def platform_tags(binary: Path, plat: str) -> str:
    """The wheel's platform tag for the executor in it, honest and accepted by PyPI.

    The executor is plain C that does not link Python, so the wheel fits every Python 3
    (``py3-none``); only the platform matters. A static executor (the usual case) runs on
    any Linux of its architecture: manylinux2014 (glibc 2.17, the oldest floor tools
    still build for) and musllinux. A dynamic one needs this machine's glibc or newer.
    No executor (no compiler): pure Python, ``any``. ``linux_*`` tags are refused by PyPI.
    """
    if not binary.is_file():
        return "any"
    if not plat.startswith("linux_"):
        return plat
    arch = plat.removeprefix("linux_")
    if elf_is_static(binary):
        return (f"manylinux_2_17_{arch}.manylinux2014_{arch}.musllinux_1_1_{arch}")
    libc, _, version = (os.confstr("CS_GNU_LIBC_VERSION") or "").partition(" ")
    if libc == "glibc" and version.count(".") >= 1:
        major, minor = version.split(".")[:2]
        return f"manylinux_{major}_{minor}_{arch}"
    return plat


class PlatformDistribution(Distribution):
    """The wheel holds a native executable: platlib, tagged for a platform (not pure)."""

    def has_ext_modules(self) -> bool:
        return True


class PlatformWheel(bdist_wheel):
    """Tag the wheel ``py3-none-<platform>``: any Python 3.11+ (``requires-python``),
    the executor's platform (not ``cp311-cp311``: the executor does not link Python)."""

    def get_tag(self) -> tuple[str, str, str]:
        _, _, plat = super().get_tag()
        build_lib = Path(self.get_finalized_command("build").build_lib)
        # The executor this wheel holds (an editable wheel holds none: "any" suits it).
        return "py3", "none", platform_tags(build_lib / NATIVE / BINARY, plat)


# The TUI lives in the repository's app/ folder but installs as the package `forkdeck`.
PACKAGES = [
    *find_packages(include=["branching_core", "branching_core.*"]),
    "forkdeck",
    *(f"forkdeck.{name}" for name in find_packages("app")),
]

setup(
    cmdclass={"build_py": BuildPyWithExecutor, "bdist_wheel": PlatformWheel},
    distclass=PlatformDistribution,
    packages=PACKAGES,
    package_dir={"forkdeck": "app"},
)
