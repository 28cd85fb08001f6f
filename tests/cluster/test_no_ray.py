"""Without the ray extra: one clear error naming it (Ray hidden in a fresh interpreter)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_without_ray_the_runner_names_the_extra(tmp_path: Path) -> None:
    script = (
        "import sys\n"
        "sys.modules['ray'] = None  # as if the extra were not installed\n"
        "import branching_core.patterns\n"
        "from branching_core.cluster import RayRunner\n"
        "try:\n"
        "    RayRunner()\n"
        "except ImportError as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60, check=True)
    assert out.stdout.startswith("RayUnavailableError")
    assert "pip install 'forkdeck[ray]'" in out.stdout

