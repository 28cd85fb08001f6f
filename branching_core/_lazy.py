"""Lazy package exports: ``from branching_core import X`` without importing every layer.

A package lists ``name -> module`` and gets a module-level ``__getattr__`` (PEP 562) that
imports the module on first use and caches the value, plus a ``__dir__``. This keeps
``import branching_core`` (and ``branching_core.review`` for the editor detector) from
pulling in pydantic-ai, which a CLI or a UI wants to load only when needed.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(
    package: str, table: Mapping[str, str], namespace: dict[str, Any], names: list[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package`` resolving ``table`` into ``namespace``."""

    def __getattr__(name: str) -> Any:
        module_name = table.get(name)
        if module_name is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module_name), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return names

    return __getattr__, __dir__


__all__ = ["lazy_exports"]
