"""Issue 23, finding 4: how tightly the app's features are tied to the chat screen.

Run ``python tests/app/structure_counts.py`` from the repository root; it prints

- **pokes**: attribute accesses on the concrete ``ChatScreen`` from modules other than
  ``app/chat/screen.py``. A name counts as the screen when its annotation names
  ``ChatScreen`` (a parameter, ``x: ChatScreen``, ``self.x: ChatScreen | None``), when it is
  ``self.x`` of a class (or its subclass) that stored such a name in ``self.x``, or when it
  was assigned from one of those (``screen = self.screen``). An access through a feature's
  protocol (the screen behind a ``ForkHost``, say) does not count: that is the point.
- **modules importing ``chat.screen``**: ``import`` statements of the screen's module
  outside ``app/chat``, ``if TYPE_CHECKING:`` ones included.
- **import cycles**: strongly connected components among ``forkdeck`` modules in grimp's
  graph (every import statement, ``TYPE_CHECKING`` and function-level ones included).

Why a script in the tests: ``test_app_structure.py`` asserts the last two stay at zero, and
this prints the first for the architecture page's before/after table.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "app"
SCREEN_MODULE = APP / "chat" / "screen.py"


def _mentions_screen(annotation: ast.expr | None) -> bool:
    return annotation is not None and "ChatScreen" in ast.unparse(annotation)


def _functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def _self_attr(node: ast.expr) -> str | None:
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    ):
        return node.attr
    return None


def _class_screen_attrs(trees: dict[Path, ast.Module]) -> dict[str, set[str]]:
    """Class name -> the ``self.x`` attributes holding the screen (bases included)."""
    own: dict[str, set[str]] = {}
    bases: dict[str, list[str]] = {}
    for tree in trees.values():
        for cls in ast.walk(tree):
            if not isinstance(cls, ast.ClassDef):
                continue
            bases[cls.name] = [ast.unparse(b).split(".")[-1] for b in cls.bases]
            attrs = own.setdefault(cls.name, set())
            for fn in _functions(cls):
                params = {a.arg for a in fn.args.args + fn.args.kwonlyargs
                          if _mentions_screen(a.annotation)}
                for node in ast.walk(fn):
                    if (
                        isinstance(node, ast.AnnAssign)
                        and _mentions_screen(node.annotation)
                        and (name := _self_attr(node.target)) is not None
                    ):
                        attrs.add(name)
                    if (
                        isinstance(node, ast.Assign)
                        and isinstance(node.value, ast.Name)
                        and node.value.id in params
                    ):
                        attrs.update(n for t in node.targets if (n := _self_attr(t)))

    def resolved(name: str, seen: frozenset[str] = frozenset()) -> set[str]:
        if name in seen or name not in own:
            return set()
        out = set(own[name])
        for base in bases.get(name, []):
            out |= resolved(base, seen | {name})
        return out

    return {name: resolved(name) for name in own}


def pokes(app: Path = APP) -> dict[str, int]:
    """Module path (relative to ``app``) -> attribute accesses on the concrete screen."""
    trees = {
        path: ast.parse(path.read_text())
        for path in sorted(app.rglob("*.py"))
        if path != app / "chat" / "screen.py"
    }
    class_attrs = _class_screen_attrs(trees)
    counts: dict[str, int] = {}
    for path, tree in trees.items():
        total = 0
        classes = [c for c in ast.walk(tree) if isinstance(c, ast.ClassDef)]
        owner = {id(fn): cls.name for cls in classes for fn in _functions(cls)}
        for fn in _functions(tree):
            attrs = class_attrs.get(owner.get(id(fn), ""), set())
            names = {a.arg for a in fn.args.args + fn.args.kwonlyargs
                     if _mentions_screen(a.annotation)}
            for node in ast.walk(fn):  # aliases: screen = self.screen
                if isinstance(node, ast.Assign) and len(node.targets) == 1:
                    target, value = node.targets[0], node.value
                    if isinstance(target, ast.Name) and (
                        (isinstance(value, ast.Name) and value.id in names)
                        or _self_attr(value) in attrs
                    ):
                        names.add(target.id)
            for node in ast.walk(fn):
                if not isinstance(node, ast.Attribute):
                    continue
                value = node.value
                if (isinstance(value, ast.Name) and value.id in names) or (
                    _self_attr(value) in attrs
                ):
                    total += 1
        if total:
            counts[str(path.relative_to(app))] = total
    return counts


def screen_importers(app: Path = APP) -> list[str]:
    """Modules outside ``app/chat`` with an import of ``chat.screen`` (any kind)."""
    found = []
    for path in sorted(app.rglob("*.py")):
        if path.is_relative_to(app / "chat"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("chat.screen"):
                found.append(str(path.relative_to(app)))
                break
    return found


def import_cycles(package: str = "forkdeck", *others: str) -> list[list[str]]:
    """Strongly connected components (more than one module) among ``package``'s modules
    (``others``: further packages in the graph, e.g. ``branching_core``)."""
    import grimp

    graph = grimp.build_graph(package, *others)
    modules = sorted(m for m in graph.modules if m.split(".")[0] == package)
    inside = set(modules)
    edges = {m: sorted(inside & graph.find_modules_directly_imported_by(m)) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's algorithm
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in edges[module]:
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == module:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for module in modules:
        if module not in index:
            visit(module)
    return sorted(components, key=len, reverse=True)


def main() -> None:
    counts = pokes()
    print(f"pokes (attribute accesses on ChatScreen outside app/chat/screen.py): "
          f"{sum(counts.values())}")
    for module, n in sorted(counts.items(), key=lambda kv: -kv[1]):
        print(f"  {n:4d}  {module}")
    importers = screen_importers()
    print(f"modules outside app/chat importing chat.screen: {len(importers)} "
          f"{' '.join(importers)}")
    cycles = import_cycles("forkdeck", "branching_core")
    print(f"import cycles among forkdeck modules: {len(cycles)} "
          f"(sizes {[len(c) for c in cycles]})")
    for component in cycles:
        print("  " + " ".join(component))


if __name__ == "__main__":
    main()
