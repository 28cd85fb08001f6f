"""The on-disk mirror of a fork's branches for IDE diff tools (fork infrastructure).

``materializer`` keeps ``.pydantic-deep/forks/<fork_id>/{parent,branches/<label>}/`` in
step with every branch write; ``sync`` diffs one branch path by path; ``recovery``
rebuilds or cleans the mirrors a killed process left. The other way round, ``edits``
applies what the user changes in ``branches/<label>/`` (their IDE) to that branch
(``stamps`` tells the mirror's own writes from theirs) and ``edit_relay`` tells the
branch's model and the coordinator's listeners.
"""

from __future__ import annotations

from branching_core.fork.mirror.materializer import ForkMaterializer, MirrorError
from branching_core.fork.mirror.recovery import recover_mirrors

__all__ = ["ForkMaterializer", "MirrorError", "recover_mirrors"]
