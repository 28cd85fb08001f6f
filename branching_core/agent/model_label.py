"""The ``provider:name`` a model goes by, for the screen and for price lookups.

Why one function: sub-agent runs show their model's name and fork branches look prices
up by it; both read pydantic-ai's ``Model.system`` and ``Model.model_name`` the same way
and differ only in what they do without a real provider.
"""

from __future__ import annotations

from typing import Any

UNPRICED_SYSTEMS = frozenset({"function", "test", "offline"})
"""``Model.system`` of pydantic-ai's ``FunctionModel``/``TestModel`` and our offline model:
no provider, so no price (their names are looked up bare)."""


def model_label(model: Any, *, for_prices: bool = False) -> str | None:
    """``"system:name"`` of a ``Model`` (a string is taken as it is; None for no model).

    Shown (the default): ``system:name`` when both are known, else the name, else the
    model's class name. ``for_prices``: never the class name (None instead), and an
    unpriced system is left out so the bare name is what prices are looked up by.
    """
    if model is None:
        return None
    if isinstance(model, str):
        return model
    name = getattr(model, "model_name", None)
    system = getattr(model, "system", None)
    if for_prices:
        if name and system and system not in UNPRICED_SYSTEMS:
            return f"{system}:{name}"
        return name
    return f"{system}:{name}" if system and name else str(name or type(model).__name__)


__all__ = ["UNPRICED_SYSTEMS", "model_label"]
