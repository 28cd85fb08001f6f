"""argparse ``type=`` functions: every numeric flag is checked where it is parsed.

A bad value is a usage error (exit status 2, one line) before any workspace is
opened or any branch made: ``--timeout nan`` once passed ``value <= 0`` and
``--cpu-limit inf`` reached the cgroup code, ending as a per-candidate
OverflowError with status 1.
"""

from __future__ import annotations

import argparse
import math

MAX_SECONDS = 365 * 24 * 3600.0
"""A year: longer timeouts are typos (and 1e308 overflows the thread and event-loop waits)."""


def seconds(text: str) -> float:
    """A finite, positive number of seconds, at most a year."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(
            f"must be a positive finite number of seconds, got {text!r}")
    if value > MAX_SECONDS:
        raise argparse.ArgumentTypeError(
            f"must be at most a year ({MAX_SECONDS:g} s), got {text!r}")
    return value


def count(text: str) -> int:
    """A whole number of at least 1 (attempts, candidates, retries)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def memory(text: str) -> int:
    """A memory size such as 512M or 1G (``ResourceLimits``' own rules)."""
    from branching_core.sandbox.limits import parse_memory

    try:
        return parse_memory(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def cpus(text: str) -> float:
    """A finite CPU fraction (``ResourceLimits``' own rules)."""
    from branching_core.sandbox.limits import parse_cpu

    try:
        return parse_cpu(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def pids(text: str) -> int:
    """A whole number of processes (``ResourceLimits``' own rules)."""
    from branching_core.sandbox.limits import parse_pids

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    try:
        return parse_pids(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


__all__ = ["MAX_SECONDS", "count", "cpus", "memory", "pids", "seconds"]
