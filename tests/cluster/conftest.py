"""Ray keeps its sessions under ``$RAY_TMPDIR/ray`` (default ``/tmp/ray``): a normal user
running these tests on a machine where root ran Ray gets ``PermissionError`` on root's
``/tmp/ray/ray_current_cluster``. A normal user's clusters live in a directory of its own."""

from __future__ import annotations

import os

if os.geteuid() != 0 and "RAY_TMPDIR" not in os.environ:
    os.environ["RAY_TMPDIR"] = f"/tmp/ray-uid{os.geteuid()}"
    os.makedirs(os.environ["RAY_TMPDIR"], mode=0o700, exist_ok=True)
