"""The engine raises only its own error types (issue 23).

Every exception ``branching_core`` raises is a :class:`~branching_core.errors.BranchingError`,
so a caller can tell the engine's refusals from a bug with one ``except``; where callers
expect a builtin kind (``except ValueError``), the class is that builtin too
(``InvalidArgumentError(BranchingError, ValueError)``). The scan below fails when a bare
builtin comes back; the few builtins that must stay are listed with the reason.
"""

from __future__ import annotations

import ast
import builtins
import errno
import importlib
import inspect
import pickle
import pkgutil
from pathlib import Path

import pytest

import branching_core
from branching_core import errors
from branching_core.errors import (
    BranchingError,
    InvalidArgumentError,
    InvalidStateError,
    NotFoundError,
    PathNotFoundError,
    SystemCallError,
    UnsafeChangeError,
    error_name,
)
from branching_core.sandbox.limits import parse_memory

ROOT = Path(branching_core.__file__).parent
BUILTIN_EXCEPTIONS = frozenset(
    name for name, obj in vars(builtins).items()
    if isinstance(obj, type) and issubclass(obj, BaseException)
)

# Whole files that must stay free of branching_core: they run as programs of their own.
STANDALONE = {
    "workspace/_mount_helper_main.py":
        "runs as `python -I -S -c <source>` in the mount helper and must not import the engine",
    "external/ptyhost.py":
        "runs with -I from its file as the pty host program; SystemExit is how it exits",
}

# (file, enclosing function, builtin) -> why the builtin must stay.
ALLOWED = {
    ("_lazy.py", "__getattr__", "AttributeError"):
        "a module __getattr__ must raise AttributeError (hasattr/getattr defaults rely on it)",
    ("sandbox/__init__.py", "__getattr__", "AttributeError"):
        "a module __getattr__ must raise AttributeError (hasattr/getattr defaults rely on it)",
    ("sandbox/_syscalls.py", "_check", "OSError"):
        "OSError(errno, ...) becomes FileNotFoundError/PermissionError/... by errno, which "
        "callers catch; an engine subclass would stay a plain OSError",
    ("sandbox/steps.py", "_ensure_dir", "OSError"):
        "re-raises the OS's errno with the mount point named: the builtin picks the "
        "errno's subclass (PermissionError, ...) the sandbox setup reports",
    ("cluster/cancel_shield.py", "_raise_cancel", "KeyboardInterrupt"):
        "Ray's cancel as Ray raises it: a task ending in anything else is recorded as failed",
    ("workspace/faults.py", "<lambda>", "KeyboardInterrupt"):
        "fault injection for the crash tests: it must be exactly what the user raises",
    ("workspace/faults.py", "<lambda>", "OSError"):
        "fault injection for the crash tests: it must be exactly what the kernel raises",
    ("workspace/faults.py", "<lambda>", "PermissionError"):
        "fault injection for the crash tests: it must be exactly what the kernel raises",
}


def _sources(root: Path = ROOT) -> list[tuple[str, ast.Module]]:
    out = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel not in STANDALONE:
            out.append((rel, ast.parse(path.read_text(), str(path))))
    return out


def _enclosing(tree: ast.Module) -> dict[int, str]:
    """id(node) -> the name of the innermost function holding it."""
    names: dict[int, str] = {}

    def visit(node: ast.AST, name: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = name
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                inner = child.name
            elif isinstance(child, ast.Lambda):
                inner = "<lambda>"
            names[id(child)] = inner
            visit(child, inner)

    visit(tree, "<module>")
    return names


def _is_abstract_stub(node: ast.Raise) -> bool:
    """``raise NotImplementedError`` with no message: an abstract method's body."""
    exc = node.exc
    return (isinstance(exc, ast.Name) and exc.id == "NotImplementedError") or (
        isinstance(exc, ast.Call) and isinstance(exc.func, ast.Name)
        and exc.func.id == "NotImplementedError" and not exc.args
    )


def _builtin_errors(root: Path = ROOT) -> list[str]:
    """Every builtin exception the engine raises, or builds to be raised or returned."""
    found = []
    for rel, tree in _sources(root):
        where = _enclosing(tree)
        raised: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Raise) and node.exc is not None:
                raised.add(id(node.exc))
                if _is_abstract_stub(node):
                    continue
                exc = node.exc
                func = exc.func if isinstance(exc, ast.Call) else exc
                if isinstance(exc, ast.Call):
                    raised.add(id(exc))
                if isinstance(func, ast.Name) and func.id in BUILTIN_EXCEPTIONS:
                    key = (rel, where.get(id(node), "<module>"), func.id)
                    if key not in ALLOWED:
                        found.append(f"{rel}:{node.lineno} raise {func.id} in {key[1]}")
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and id(node) not in raised
                    and isinstance(node.func, ast.Name) and node.func.id in BUILTIN_EXCEPTIONS):
                key = (rel, where.get(id(node), "<module>"), node.func.id)
                if key not in ALLOWED:
                    found.append(f"{rel}:{node.lineno} builds {node.func.id} in {key[1]}")
    return found


def test_engine_raises_no_bare_builtin_exception() -> None:
    found = _builtin_errors()
    assert not found, (
        "the engine raises a bare builtin; use a class of branching_core/errors.py "
        "(InvalidArgumentError is a ValueError, InvalidStateError a RuntimeError, ...):\n"
        + "\n".join(found)
    )


def test_allow_list_has_no_stale_entries() -> None:
    """Each allowed builtin is still there; a fixed one is taken off the list."""
    present = set()
    for rel, tree in _sources():
        where = _enclosing(tree)
        for node in ast.walk(tree):
            func = node.func if isinstance(node, ast.Call) else node
            if isinstance(func, ast.Name) and func.id in BUILTIN_EXCEPTIONS:
                present.add((rel, where.get(id(node), "<module>"), func.id))
    assert set(ALLOWED) <= present, sorted(set(ALLOWED) - present)


def test_the_scan_sees_a_bare_builtin(tmp_path: Path) -> None:
    """The scan is not vacuous: a raised or returned builtin is reported, an abstract
    stub and a re-raise are not."""
    (tmp_path / "bad.py").write_text(
        "def f(x):\n    if x:\n        raise ValueError('no')\n"
        "    return RuntimeError('built')\n"
        "def g():\n    raise NotImplementedError\n"
        "def h():\n    try:\n        pass\n    except OSError as exc:\n        raise exc\n"
    )
    assert _builtin_errors(tmp_path) == [
        "bad.py:3 raise ValueError in f", "bad.py:4 builds RuntimeError in f",
    ]


def _engine_modules() -> list[object]:
    modules = []
    for info in pkgutil.walk_packages(branching_core.__path__, "branching_core."):
        if info.name.removeprefix("branching_core.").replace(".", "/") + ".py" in STANDALONE:
            continue
        if info.name == "branching_core.cli.__main__":
            continue  # runs the CLI on import
        modules.append(importlib.import_module(info.name))
    return modules


def _exception_classes() -> list[type[BaseException]]:
    seen: dict[str, type[BaseException]] = {}

    def collect(owner: object, module: str) -> None:
        for obj in vars(owner).values():
            if (isinstance(obj, type) and obj.__module__ == module
                    and f"{module}.{obj.__qualname__}" not in seen):
                if issubclass(obj, BaseException):
                    seen[f"{module}.{obj.__qualname__}"] = obj
                collect(obj, module)

    for module in _engine_modules():
        collect(module, module.__name__)  # type: ignore[attr-defined]
    return list(seen.values())


def test_every_engine_exception_class_derives_from_branching_error() -> None:
    classes = _exception_classes()
    assert len(classes) > 40  # the walk found the engine's classes, not nothing
    outside = sorted(f"{c.__module__}.{c.__qualname__}" for c in classes
                     if not issubclass(c, BranchingError))
    assert not outside, f"exception classes outside the BranchingError hierarchy: {outside}"


def test_no_class_statement_derives_from_a_builtin_only() -> None:
    """The same rule read from the source, for classes defined inside functions too."""
    found = []
    for rel, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b) for b in node.bases]
                if bases and all(b in BUILTIN_EXCEPTIONS for b in bases) and rel != "errors.py":
                    found.append(f"{rel}:{node.lineno} class {node.name}({', '.join(bases)})")
    # errors.py roots the tree: BranchingError(Exception) is the one class on a builtin only.
    root = [c for c in errors.__dict__.values()
            if isinstance(c, type) and c.__module__ == errors.__name__
            and issubclass(c, BaseException) and not issubclass(c, BranchingError)]
    assert not found and not root, found + [c.__name__ for c in root]


def _stand_ins() -> list[type[BranchingError]]:
    return [c for c in vars(errors).values()
            if isinstance(c, type) and issubclass(c, BranchingError)
            and c.__dict__.get("shows_as_builtin")]


def test_each_stand_in_is_the_builtin_callers_catch_and_shows_its_name() -> None:
    expected = {"InvalidArgumentError": ValueError, "InvalidTypeError": TypeError,
                "InvalidStateError": RuntimeError, "OperationError": RuntimeError,
                "UnsupportedError": NotImplementedError, "NotFoundError": KeyError,
                "TimedOutError": TimeoutError, "SystemCallError": OSError}
    assert {c.__name__ for c in _stand_ins()} == set(expected)
    for cls in _stand_ins():
        builtin = expected[cls.__name__]
        exc = cls("one line")
        assert isinstance(exc, builtin) and isinstance(exc, BranchingError)
        assert error_name(exc) == builtin.__name__
        assert str(exc) == str(builtin("one line"))
        again = pickle.loads(pickle.dumps(exc))  # crosses process and Ray boundaries
        assert type(again) is cls and str(again) == str(exc)


def test_os_stand_ins_keep_errno_and_message() -> None:
    exc = PathNotFoundError(errno.ENOENT, "the commit's source is gone", "/ws/a")
    assert isinstance(exc, FileNotFoundError) and isinstance(exc, BranchingError)
    assert (exc.errno, exc.filename) == (errno.ENOENT, "/ws/a")
    assert str(exc) == str(FileNotFoundError(errno.ENOENT, "the commit's source is gone", "/ws/a"))
    assert error_name(exc) == "FileNotFoundError"
    assert error_name(SystemCallError(errno.EINVAL, "kernel kept memory.max at 0")) == "OSError"
    assert str(NotFoundError("no checkpoint 'x'")) == str(KeyError("no checkpoint 'x'"))


def test_named_engine_errors_show_their_own_name() -> None:
    assert error_name(UnsafeChangeError("refused")) == "UnsafeChangeError"
    assert error_name(ValueError("plain")) == "ValueError"


def test_a_real_refusal_is_both_kinds() -> None:
    """A caller's ``except ValueError`` and ``except BranchingError`` both catch it."""
    with pytest.raises(ValueError, match="not a size like 512M") as caught:
        parse_memory("lots")
    assert isinstance(caught.value, InvalidArgumentError)
    assert f"{error_name(caught.value)}: {caught.value}" == (
        "ValueError: memory limit 'lots' is not a size like 512M or 1G"
    )


def test_hierarchy_in_docstring_names_every_class() -> None:
    """The tree in the module docstring is the reference: it lists every class."""
    doc = inspect.getdoc(errors) or ""
    missing = [c.__name__ for c in vars(errors).values()
               if isinstance(c, type) and c.__module__ == errors.__name__
               and issubclass(c, BranchingError) and c.__name__ not in doc]
    assert not missing, missing
    assert isinstance(InvalidStateError("x"), RuntimeError)
