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
import subprocess
import sys
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

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


class PlatformDistribution(Distribution):
    """The wheel holds a native executable: tag it for this platform, not py3-none-any."""

    def has_ext_modules(self) -> bool:
        return True


# The TUI lives in the repository's app/ folder but installs as the package `forkdeck`.
PACKAGES = [
    *find_packages(include=["branching_core", "branching_core.*"]),
    "forkdeck",
    *(f"forkdeck.{name}" for name in find_packages("app")),
]

setup(
    cmdclass={"build_py": BuildPyWithExecutor},
    distclass=PlatformDistribution,
    packages=PACKAGES,
    package_dir={"forkdeck": "app"},
)
