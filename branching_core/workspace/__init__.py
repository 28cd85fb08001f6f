"""Copy-on-write workspaces: ``Workspace``, ``Branch`` and their backends.

Importing this package loads only the standard library.
"""

from branching_core.workspace.apply import changed_since  # parent paths changed since a fork
from branching_core.workspace.branch import Branch
from branching_core.workspace.changes import BranchChanges
from branching_core.workspace.fsutil import rmtree  # removes read-only trees too
from branching_core.workspace.names import validate_branch_name
from branching_core.workspace.workspace import BranchInfo, Workspace, close_all_workspaces

__all__ = [
    "Branch",
    "BranchChanges",
    "BranchInfo",
    "Workspace",
    "changed_since",
    "close_all_workspaces",
    "rmtree",
    "validate_branch_name",
]
