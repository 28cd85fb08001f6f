"""Text a model reads: the discovery listing and the branch result (XML, as in seed 002).

XML keeps nested fields readable for a model without JSON escaping noise; every value is
escaped, so a sub-agent's output can never close a tag it did not open.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from xml.sax.saxutils import escape

from pydantic import BaseModel

from branching_core.live.subagents.definition import SubAgent


def _tag(name: str) -> str:
    """A field name usable as an XML tag (pydantic field names nearly always are)."""
    cleaned = "".join(ch if ch.isalnum() or ch in "_-." else "_" for ch in name)
    return cleaned if cleaned and (cleaned[0].isalpha() or cleaned[0] == "_") else f"_{cleaned}"


def to_xml(value: Any, tag: str, indent: int = 0) -> list[str]:
    """Render a JSON-like value as indented XML lines."""
    pad = "  " * indent
    tag = _tag(tag)
    if isinstance(value, dict):
        if not value:
            return [f"{pad}<{tag}/>"]
        lines = [f"{pad}<{tag}>"]
        for key, item in value.items():
            lines.extend(to_xml(item, str(key), indent + 1))
        lines.append(f"{pad}</{tag}>")
        return lines
    if isinstance(value, list):
        if not value:
            return [f"{pad}<{tag}/>"]
        lines = [f"{pad}<{tag}>"]
        for item in value:
            lines.extend(to_xml(item, "item", indent + 1))
        lines.append(f"{pad}</{tag}>")
        return lines
    if value is None:
        text = "null"
    elif isinstance(value, bool):
        text = "true" if value else "false"
    else:
        text = str(value)
    return [f"{pad}<{tag}>{escape(text)}</{tag}>"]


def branch_result_xml(output: BaseModel) -> str:
    """``end_result``: the final output as ``<branch_result>...</branch_result>``."""
    return "\n".join(to_xml(output.model_dump(mode="json"), "branch_result"))


def summary_text(summary: str, output: BaseModel | str | None) -> str:
    """``summarize``: the summary, then the final result (as in seed 002)."""
    if isinstance(output, BaseModel):
        final = json.dumps(output.model_dump(mode="json"), ensure_ascii=False)
    elif output is None:
        final = "(none)"
    else:
        final = str(output)
    return f"Branch summary:\n{summary.strip()}\n\nFinal result:\n{final}"


def _schema_type(prop: dict[str, Any]) -> str:
    if "type" in prop:
        return str(prop["type"])
    for key in ("anyOf", "oneOf"):
        if key in prop:
            return " | ".join(_schema_type(p) for p in prop[key])
    if "$ref" in prop:
        return str(prop["$ref"]).rsplit("/", 1)[-1]
    return "any"


def input_fields(model: type[BaseModel] | None) -> list[dict[str, Any]]:
    """One entry per input field: name, type, required, description."""
    if model is None:
        return []
    schema = model.model_json_schema()
    required = set(schema.get("required", []))
    fields = []
    for name, prop in schema.get("properties", {}).items():
        fields.append(
            {
                "name": name,
                "type": _schema_type(prop),
                "required": name in required,
                "description": prop.get("description") or prop.get("title") or "",
            }
        )
    return fields


def discovery_xml(definitions: Sequence[SubAgent]) -> str:
    """``branch()`` with no arguments: every branch, its description and its input schema."""
    if not definitions:
        return "<available_branches/>"
    lines = ["<available_branches>"]
    for definition in definitions:
        lines.append("  <branches>")
        lines.append(f"    <name>{escape(definition.name)}</name>")
        lines.append(f"    <description>{escape(definition.display_description)}</description>")
        fields = input_fields(definition.initial_input)
        if not fields:
            lines.append("    <input_schema/>")
        for entry in fields:
            lines.append("    <input_schema>")
            for key in ("name", "type", "required", "description"):
                lines.extend(to_xml(entry[key], key, 3))
            lines.append("    </input_schema>")
        returns = "structured" if definition.final_output is not None else "text (summarized)"
        lines.append(f"    <returns>{returns}</returns>")
        lines.append("  </branches>")
    lines.append("</available_branches>")
    return "\n".join(lines)


__all__ = [
    "branch_result_xml",
    "discovery_xml",
    "input_fields",
    "summary_text",
    "to_xml",
]
