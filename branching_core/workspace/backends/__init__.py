"""Copy-on-write backends: how a branch's view is made, read back and thrown away."""

from branching_core.workspace.backends.base import Backend, BranchLayout, ParentView
from branching_core.workspace.backends.copy import CopyBackend
from branching_core.workspace.backends.overlay import OverlayBackend
from branching_core.workspace.backends.reflink import ReflinkBackend

BACKENDS: dict[str, type[Backend]] = {
    "overlay": OverlayBackend,
    "reflink": ReflinkBackend,
    "copy": CopyBackend,
}
AUTO_ORDER = ("overlay", "reflink", "copy")

__all__ = [
    "AUTO_ORDER",
    "BACKENDS",
    "Backend",
    "BranchLayout",
    "CopyBackend",
    "OverlayBackend",
    "ParentView",
    "ReflinkBackend",
]
