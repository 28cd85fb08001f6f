"""The typed results of the MCP tools (their output schemas, described for a model).

Pydantic models give each tool an ``outputSchema`` and structured content, so a client
reads fields instead of parsing prose; every text field that can grow is bounded (see
``bounds``) and says so in ``note``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class RunLimits(BaseModel):
    """Resource caps for one ``branch_run`` (each overrides the server's own)."""

    model_config = ConfigDict(extra="forbid")

    memory: int | str | None = Field(
        default=None, description="Memory cap: bytes, or a size such as '512M' or '2G'.")
    cpu: float | None = Field(
        default=None, description="CPU share in cores: 0.5 is half a core, 2 two cores.")
    pids: int | None = Field(default=None, description="Most processes at once.")


class BranchCreated(BaseModel):
    label: str = Field(description="The branch's label: pass it to the other branch_* tools.")
    path: str = Field(
        description="A real directory holding the branch's copy of the workspace. Read, "
        "write and edit files there with your own file tools."
    )
    parent: str | None = Field(description="Label of the parent branch; null for the workspace.")
    keep: bool = Field(description="Whether the branch outlives this server's session.")
    note: str


class BranchEntry(BaseModel):
    label: str
    parent: str | None = Field(description="Parent branch label; null for the workspace.")
    path: str = Field(description="The branch's directory (see branch_create).")
    changed: int = Field(description="How many paths differ from the parent.")
    created: str = Field(description="When the branch was created (ISO 8601, UTC).")
    keep: bool


class BranchListing(BaseModel):
    workspace: str
    branches: list[BranchEntry]
    note: str = ""


class RunResult(BaseModel):
    label: str
    command: str
    exit_code: int = Field(description="The command's exit status; negative: killed by a signal.")
    timed_out: bool
    duration_s: float
    stdout: str
    stderr: str
    note: str = Field(default="", description="Says when output was cut.")


ChangeKind = Literal["created", "modified", "deleted", "renamed"]


class ChangedPath(BaseModel):
    path: str = Field(description="Path relative to the workspace root.")
    status: ChangeKind
    old_path: str | None = Field(default=None, description="For a rename: where it came from.")


class DiffResult(BaseModel):
    label: str
    changes: list[ChangedPath]
    diff: str = Field(description="Unified diff of the text files (parent -> branch).")
    truncated: bool
    note: str = ""


class CommitResult(BaseModel):
    label: str
    committed: bool
    into: str = Field(description="Where the changes landed: the workspace path or a parent label.")
    created: list[str]
    modified: list[str]
    deleted: list[str]
    note: str = ""


class AbortResult(BaseModel):
    label: str
    aborted: list[str] = Field(description="Every branch thrown away: this one and its children.")


class CandidateReport(BaseModel):
    index: int
    command: str
    status: str = Field(
        description="committed, aborted, lost_race, timed_out, failed or cancelled."
    )
    success: bool
    exit_code: int | None
    score: float
    duration_s: float
    error: str | None = None


class ExploreResult(BaseModel):
    mode: Literal["first_success", "best_score"]
    committed: bool = Field(description="Whether the winner's changes landed in the workspace.")
    winner: int | None = Field(description="Index (in commands) of the winner; null if none.")
    candidates: list[CandidateReport]
    duration_s: float
    note: str = ""


__all__ = [
    "AbortResult",
    "BranchCreated",
    "BranchEntry",
    "BranchListing",
    "CandidateReport",
    "ChangedPath",
    "CommitResult",
    "DiffResult",
    "ExploreResult",
    "RunLimits",
    "RunResult",
]
