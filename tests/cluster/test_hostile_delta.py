"""Issue 22.1 on a real Ray cluster: a node is untrusted, and what its delta says never
lands outside the workspace.

A candidate runs on a node of a real local two-node cluster (``ray.cluster_utils.Cluster``)
and, being code on that node, replaces the node's delta collection for its own task (what
a compromised node can do): the delta it sends back holds an absolute path, a deep ``../``
path, a symlink and a write through it, or a setuid file. The driver lands it through the
public commit path (``Speculate(..., runner=RayRunner())`` -> ``RemoteBranch.commit`` ->
``delta.apply``). The canary directory beside the workspace and the workspace itself are
compared before and after.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip(
    "ray", reason="the ray extra is not installed: pip install 'forkdeck[ray]'"
)

from branching_core.cluster import RayRunner  # noqa: E402
from branching_core.errors import UnsafeChangeError  # noqa: E402
from branching_core.patterns import Speculate  # noqa: E402
from branching_core.workspace import Workspace  # noqa: E402
from tests.cluster.ray_cluster import two_node_cluster  # noqa: E402

ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    with two_node_cluster(tmp_path_factory.mktemp("raycluster"), num_cpus=1) as c:
        yield c


def tree(root: Path) -> dict[str, tuple[Any, ...]]:
    out: dict[str, tuple[Any, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir == ".":
            dirnames[:] = [d for d in dirnames if d != ".pydantic-deep"]
        for name in dirnames + filenames:
            full = Path(dirpath, name)
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            st = os.lstat(full)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("l", os.readlink(full))
            elif stat.S_ISREG(st.st_mode):
                out[rel] = ("f", st.st_mode, hashlib.sha256(full.read_bytes()).hexdigest())
            else:
                out[rel] = ("d", st.st_mode)
    return out


def hostile(shape: str, canary: str) -> Any:
    """A candidate that, on its node, makes its own task send back a forged delta."""

    def candidate(path: Path) -> bool:
        import branching_core.cluster.task as task

        real = task.collect

        def forged(branch: Any, base: Path) -> Any:
            task.collect = real  # once: the worker process serves later tasks too
            delta = real(branch, base)
            if shape == "absolute":
                delta.files[f"{canary}/new.txt"] = (0o644, b"pwned\n")
            elif shape == "dotdot":
                delta.files["src/../../../../../../../" + canary.lstrip("/") + "/x"] = (
                    0o644, b"pwned\n")
            elif shape == "link-then-write":
                delta.symlinks["lnk"] = canary
                delta.files["lnk/target.txt"] = (0o644, b"pwned\n")
            elif shape == "delete-through-link":
                delta.symlinks["lnk"] = canary
                delta.deleted.append("lnk/target.txt")
            return delta

        task.collect = forged
        (path / "honest.txt").write_text("the candidate's real work\n")
        return True

    return candidate


def setuid_maker(path: Path) -> bool:
    (path / "tool").write_bytes(b"#!/bin/sh\necho hi\n")
    os.chmod(path / "tool", 0o6755)
    return True


@pytest.mark.parametrize(
    "shape", ["absolute", "dotdot", "link-then-write", "delete-through-link"]
)
def test_a_forged_node_delta_is_refused_whole_and_nothing_escapes(
    cluster: dict[str, Any], tmp_path: Path, shape: str
) -> None:
    canary = tmp_path / "canary"
    canary.mkdir()
    (canary / "target.txt").write_text("canary\n")
    project = tmp_path / "project"
    (project / "src").mkdir(parents=True)
    (project / "src" / "app.py").write_text("VALUE = 1\n")
    ws = Workspace(project)
    canary_before, project_before = tree(canary), tree(project)
    outcome = Speculate([hostile(shape, str(canary))], runner=RayRunner())(ws)
    assert not outcome.committed
    [result] = outcome.all_results
    assert result.status != "committed"
    assert isinstance(result.exception, UnsafeChangeError), result
    assert tree(canary) == canary_before
    assert tree(project) == project_before  # not even the honest file: all or nothing
    ws.close()


def test_a_node_delta_lands_without_setuid_setgid(cluster: dict[str, Any], tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    ws = Workspace(project)
    outcome = Speculate([setuid_maker], runner=RayRunner())(ws)
    assert outcome.committed, outcome.all_results
    assert stat.S_IMODE(os.stat(project / "tool").st_mode) == 0o755
    ws.close()
