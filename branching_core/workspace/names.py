"""Branch-name rules: a name becomes one path component of ``branch_path``."""

from __future__ import annotations

from branching_core.errors import InvalidBranchNameError

MAX_NAME_LENGTH = 128


def validate_branch_name(name: object) -> str:
    """Return ``name`` if usable as a branch name, else raise with the reason."""
    if not isinstance(name, str) or not name:
        raise InvalidBranchNameError("branch name must be a non-empty string")
    if "\x00" in name:
        raise InvalidBranchNameError(f"branch name {name!r} contains a NUL byte")
    if "/" in name:
        raise InvalidBranchNameError(f"branch name {name!r} contains '/'")
    if ".." in name or name == ".":
        raise InvalidBranchNameError(f"branch name {name!r} contains '..' or is '.'")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidBranchNameError(f"branch name is longer than {MAX_NAME_LENGTH} characters")
    return name
