from __future__ import annotations

from tests.support.project_fixtures import project, runner, ws

__all__ = ["project", "runner", "ws"]
