"""``ResourceLimits``: what a branch may use, validated once, in the caller.

Parsing and validation happen in the parent so that a bad value ("12 parsecs",
a negative CPU share) is reported before anything is forked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_MEMORY_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)


def parse_memory(value: int | str) -> int:
    """Bytes from an int or a string such as ``"512M"``, ``"1G"``, ``"64MiB"``."""
    if isinstance(value, bool):
        raise ValueError(f"memory limit must be bytes or a size string, not {value!r}")
    if isinstance(value, int):
        number = value
    else:
        match = _MEMORY_RE.match(value)
        if match is None:
            raise ValueError(f"memory limit {value!r} is not a size like 512M or 1G")
        number = int(float(match.group(1)) * _UNITS[match.group(2).upper()])
    if number <= 0:
        raise ValueError(f"memory limit must be positive, got {value!r}")
    return number


@dataclass(frozen=True)
class ResourceLimits:
    """Per-branch limits; every field ``None`` means "isolate, but do not limit".

    ``memory`` is bytes (or ``"512M"``), ``cpu`` a fraction of one CPU (0.5 = half
    a core, 2.0 = two cores), ``pids`` the most tasks the branch may have at once.
    """

    memory: int | str | None = None
    cpu: float | None = None
    pids: int | None = None

    def __post_init__(self) -> None:
        if self.memory is not None:
            object.__setattr__(self, "memory", parse_memory(self.memory))
        if self.cpu is not None:
            cpu = float(self.cpu)
            if not cpu > 0:
                raise ValueError(f"cpu limit must be a positive CPU fraction, got {self.cpu!r}")
            object.__setattr__(self, "cpu", cpu)
        if self.pids is not None:
            if isinstance(self.pids, bool) or int(self.pids) < 1:
                raise ValueError(f"pids limit must be a positive integer, got {self.pids!r}")
            object.__setattr__(self, "pids", int(self.pids))

    @property
    def memory_bytes(self) -> int | None:
        return self.memory if isinstance(self.memory, int) else None

    @property
    def any(self) -> bool:
        """Whether at least one limit was asked for (so a cgroup is needed)."""
        return self.memory is not None or self.cpu is not None or self.pids is not None

    def controllers(self) -> list[str]:
        """The cgroup controllers these limits need, in a stable order."""
        wanted = []
        if self.memory is not None:
            wanted.append("memory")
        if self.cpu is not None:
            wanted.append("cpu")
        if self.pids is not None:
            wanted.append("pids")
        return wanted


__all__ = ["ResourceLimits", "parse_memory"]
