"""Is this fork a code change or a research/writing task? (``judge_domain``)

Why: a judge told "passing tests matter most; minimal changes win" picks badly between two
drafts of an essay, where what matters is whether the text answers the question, is
accurate, complete and well organised. The judge's instructions are chosen by domain.

How: the diff report decides when branches changed files: if most touched paths (by count)
are prose (``.md``, ``.rst``, ``.txt``, ``.tex``, ...) the task is ``writing``, otherwise
``code``. With no touched path (or an even split), words in the goal decide; ``code`` is
the default, since forkdeck forks coding agents first.
"""

from __future__ import annotations

import re
from typing import Any, Literal

JudgeDomain = Literal["code", "writing"]

PROSE_SUFFIXES = frozenset(
    {".md", ".markdown", ".rst", ".txt", ".tex", ".adoc", ".org", ".odt", ".docx", ".rtf"}
)
_WRITING_WORDS = re.compile(
    r"\b(essay|article|blog|post|draft|write[- ]?up|report|summar(y|ise|ize)|research|"
    r"literature|paper|chapter|story|prose|document(ation)?|proofread|rewrite the text|"
    r"explain|compare the sources|outline)\b",
    re.IGNORECASE,
)
_CODE_WORDS = re.compile(
    r"\b(fix|bug|test|tests|function|class|method|refactor|implement|compile|build|"
    r"crash|exception|api|endpoint|module|parser|regression|lint|type error)\b",
    re.IGNORECASE,
)


def _suffix(path: str) -> str:
    name = path.rsplit("/", 1)[-1].lower()
    return name[name.rfind(".") :] if "." in name else ""


def judge_domain(goal: str | None, report: Any = None) -> JudgeDomain:
    """``writing`` when the branches mostly touched prose files (or, with no files to go
    by, the goal reads like a writing/research task), else ``code``."""
    if report is not None:
        touched = [e.path for e in report.paths if e.touched_by]
        if touched:
            prose = sum(1 for p in touched if _suffix(p) in PROSE_SUFFIXES)
            if prose * 2 > len(touched):
                return "writing"
            if prose * 2 < len(touched):
                return "code"
    text = goal or ""
    writing = len(_WRITING_WORDS.findall(text))
    code = len(_CODE_WORDS.findall(text))
    return "writing" if writing > code else "code"


__all__ = ["PROSE_SUFFIXES", "JudgeDomain", "judge_domain"]
