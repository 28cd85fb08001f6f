"""``ResourceLimits``: what a branch may use, validated once, in the caller.

Parsing and validation happen in the parent so that a bad value ("12 parsecs",
a negative CPU share) is reported before anything is forked.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from branching_core.errors import InvalidArgumentError

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_MEMORY_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)

MAX_MEMORY = 1 << 50
"""1 PiB: more than any host has; larger values are typos (and overflow the kernel's page count)."""
MIN_CPU = 0.01
"""The kernel's smallest CFS quota is 1 ms per 100 ms period."""
MAX_CPU = 1024.0
MAX_PIDS = 1 << 22
"""The kernel's largest pid_max."""


def parse_memory(value: object) -> int:
    """Bytes from an int or a string such as ``"512M"``, ``"1G"``, ``"64MiB"``."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise InvalidArgumentError(
            f"memory limit must be bytes (an int) or a size like 512M, not {value!r}"
        )
    if isinstance(value, int):
        number = value
    else:
        match = _MEMORY_RE.match(value)
        if match is None:
            raise InvalidArgumentError(f"memory limit {value!r} is not a size like 512M or 1G")
        number = int(float(match.group(1)) * _UNITS[match.group(2).upper()])
    if number <= 0:
        raise InvalidArgumentError(f"memory limit must be positive, got {value!r}")
    if number > MAX_MEMORY:
        raise InvalidArgumentError(f"memory limit {value!r} is larger than 1 PiB")
    return number


def parse_cpu(value: float | int | str) -> float:
    """A finite CPU fraction between ``MIN_CPU`` and ``MAX_CPU`` (0.5 = half a core)."""
    if isinstance(value, bool):
        raise InvalidArgumentError(f"cpu limit must be a number of CPUs, not {value!r}")
    try:
        cpu = float(value)
    except (TypeError, ValueError):
        raise InvalidArgumentError(
            f"cpu limit must be a number of CPUs such as 0.5, not {value!r}"
        ) from None
    if not math.isfinite(cpu) or cpu <= 0:
        raise InvalidArgumentError(
            f"cpu limit must be a positive finite CPU fraction, got {value!r}"
        )
    if not MIN_CPU <= cpu <= MAX_CPU:
        raise InvalidArgumentError(
            f"cpu limit must be between {MIN_CPU} and {MAX_CPU:g} CPUs, got {value!r}"
        )
    return cpu


def parse_pids(value: object) -> int:
    """A whole number of tasks between 1 and the kernel's largest pid_max."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError(f"pids limit must be a whole number, not {value!r}")
    if not 1 <= value <= MAX_PIDS:
        raise InvalidArgumentError(f"pids limit must be between 1 and {MAX_PIDS}, got {value!r}")
    return value


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
        # Validated here, before any cgroup exists: inf once got as far as
        # int(inf * period) -> OverflowError with the branch cgroup left behind.
        if self.memory is not None:
            object.__setattr__(self, "memory", parse_memory(self.memory))
        if self.cpu is not None:
            object.__setattr__(self, "cpu", parse_cpu(self.cpu))
        if self.pids is not None:
            object.__setattr__(self, "pids", parse_pids(self.pids))

    @property
    def memory_bytes(self) -> int | None:
        return self.memory if isinstance(self.memory, int) else None

    @property
    def any(self) -> bool:
        """Whether at least one limit was asked for (so a cgroup is needed)."""
        return self.memory is not None or self.cpu is not None or self.pids is not None

    def controllers(self) -> list[str]:
        """The cgroup controllers these limits need, in a stable order."""
        wanted: list[str] = []
        if self.memory is not None:
            wanted.append("memory")
        if self.cpu is not None:
            wanted.append("cpu")
        if self.pids is not None:
            wanted.append("pids")
        return wanted


__all__ = ["ResourceLimits", "parse_cpu", "parse_memory", "parse_pids"]
