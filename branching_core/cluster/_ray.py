"""The one place that imports Ray, so a missing extra is one clear error."""

from __future__ import annotations

from types import ModuleType

from branching_core.errors import BranchingError

EXTRA_HINT = "pip install 'forkdeck[ray]'"


class RayUnavailableError(BranchingError, ImportError):
    """Ray is not installed (or cannot be imported) in this environment."""


def import_ray() -> ModuleType:
    try:
        import ray
    except ImportError as exc:
        raise RayUnavailableError(
            f"RayRunner needs Ray, which is not installed here ({exc}); "
            f"install the extra: {EXTRA_HINT}"
        ) from exc
    return ray


__all__ = ["EXTRA_HINT", "RayUnavailableError", "import_ray"]
