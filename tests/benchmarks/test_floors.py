"""benchmarks/floors.py runs and reports every hot path beside its floor (issue 29).

No time is asserted (the machine is shared); what is checked is that the script measures
what its --json contract names, with positive figures, so the benchmark cannot rot.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_floors_json_names_every_hot_path_with_its_floor() -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "floors.py"), "--rounds", "1", "--json"],
        capture_output=True, text=True, timeout=240, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert set(result) >= {"isolated_callable", "timeout_callable", "sandbox_start",
                           "commit_100_modified", "commit_1000_modified", "commit_per_file",
                           "sandbox_start_230mb", "isolated_callable_230mb"}
    for name, row in result.items():
        assert row["forkdeck_ms"] > 0 and row["floor_ms"] > 0, (name, row)
        assert row["ratio"] == round(row["forkdeck_ms"] / row["floor_ms"], 2), (name, row)
