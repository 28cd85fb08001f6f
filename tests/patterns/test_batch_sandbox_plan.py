"""A batch of sandboxed candidates plans the host's masks once, and plans them right."""

from __future__ import annotations

from pathlib import Path

from branching_core.sandbox.namespaces import SandboxPlan, plan_sandbox, shared_mask_plan

_MASK_FIELDS = ("hide_dirs", "hide_files", "keep_visible", "show_files", "private_run",
                "sockets")


def _plans(tmp_path: Path, names: list[str]) -> list[SandboxPlan]:
    plans = []
    for name in names:
        (tmp_path / name).mkdir()
        plan = plan_sandbox(tmp_path / name, network=False, mount_at=None)
        plan.close_fds()
        plans.append(plan)
    return plans


def test_a_batch_shares_one_mask_plan_equal_to_planning_each(tmp_path: Path) -> None:
    alone = _plans(tmp_path, ["alone-a", "alone-b"])
    with shared_mask_plan():
        batch = _plans(tmp_path, ["batch-a", "batch-b", "batch-c"])
    after = _plans(tmp_path, ["after-a"])
    # Inside the block the host was walked once: every sandbox got the same plan...
    assert batch[1].sockets is batch[0].sockets and batch[2].sockets is batch[0].sockets
    # ...and it is exactly what planning each sandbox on its own gives.
    for field in _MASK_FIELDS:
        assert getattr(batch[0], field) == getattr(alone[0], field), field
    assert batch[0].sockets is not None and batch[0].sockets.mount_points
    # Outside the block a plan is reused only through the host-socket cache, which checks
    # the mount table and every walked directory first (tests/sandbox/test_host_sockets.py);
    # what it gives is the same plan.
    for field in _MASK_FIELDS:
        assert getattr(after[0], field) == getattr(alone[1], field), field


def test_the_views_themselves_are_never_shared(tmp_path: Path) -> None:
    with shared_mask_plan():
        a, b = _plans(tmp_path, ["a", "b"])
    assert a.view.endswith("/a") and b.view.endswith("/b")
    assert a.target == a.view and b.target == b.view
