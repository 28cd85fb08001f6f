"""What survives of a damaged TOML file, and runaway nesting found without recursion."""

from __future__ import annotations

import tomllib

import pytest

from branching_core.toml_salvage import MAX_NESTING, drop_keys, parse, salvage, too_deep


def test_a_valid_file_is_returned_whole() -> None:
    assert salvage("[a]\nx = 1\n") == ({"a": {"x": 1}}, [])


def test_bad_lines_are_dropped_one_by_one() -> None:
    doc, dropped = salvage("x = 1\ny = = 2\nz = 3\nw = [\n")
    assert doc == {"x": 1, "z": 3}
    assert dropped == [2, 4]


def test_a_broken_header_takes_its_body() -> None:
    doc, dropped = salvage("[a]\nx = 1\n[b\ny = 2\n\n[c]\nz = 3\n")
    assert doc == {"a": {"x": 1}, "c": {"z": 3}}
    assert dropped == [3, 4]


def test_duplicate_keys_keep_the_first() -> None:
    assert salvage("x = 1\nx = 2\n")[0] == {"x": 1}


def test_nothing_salvageable_is_an_empty_document() -> None:
    assert salvage("[[[\n===\n")[0] == {}
    assert salvage("")[0] == {}


def test_runaway_nesting_is_a_decode_error_and_is_salvaged() -> None:
    deep = "a = " + "[" * 5000 + "]" * 5000
    with pytest.raises(tomllib.TOMLDecodeError, match="nested too deeply"):
        parse(deep)
    assert salvage(f"x = 1\n{deep}\ny = 2\n")[0] == {"x": 1, "y": 2}


def test_too_deep_names_the_keys_without_recursing() -> None:
    nested: object = 1
    for _ in range(MAX_NESTING + 1):
        nested = [nested]
    doc = {"t": {"ok": [[1]], "bad": nested}, "top": nested, "fine": 2}
    assert sorted(too_deep(doc)) == ["t.bad", "top"]
    assert drop_keys(doc, too_deep(doc)) == {"t": {"ok": [[1]]}, "fine": 2}
    assert too_deep({"t": {"x": [[1]]}}, limit=2) == ["t.x"]
