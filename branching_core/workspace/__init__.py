"""Copy-on-write workspaces: ``Workspace``, ``Branch`` and their backends.

Importing this package loads only the standard library.
"""

from branching_core.workspace.branch import Branch
from branching_core.workspace.changes import BranchChanges
from branching_core.workspace.names import validate_branch_name
from branching_core.workspace.workspace import BranchInfo, Workspace, close_all_workspaces

__all__ = [
    "Branch",
    "BranchChanges",
    "BranchInfo",
    "Workspace",
    "close_all_workspaces",
    "validate_branch_name",
]
