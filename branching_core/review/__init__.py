"""Deciding a winner: diff reports, the on-disk mirror, the diff-tool launcher, the judge."""

from branching_core.review.editor import EditorDetector, EditorKind

__all__ = ["EditorDetector", "EditorKind"]
