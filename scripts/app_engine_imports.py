"""How the app (``forkdeck``) imports the engine: ``python scripts/app_engine_imports.py [-v]``.

Prints the importer -> engine module pairs (direct imports, the grimp graph import-linter
uses), the distinct engine modules imported, and how many of those are not public. Public:
the package root ``branching_core`` and a layer package ``branching_core.<layer>`` (its
``__init__``); the rule and its contract are in docs/architecture.md.
"""

from __future__ import annotations

import sys

import grimp


def main(verbose: bool = False) -> None:
    graph = grimp.build_graph("forkdeck", "branching_core")
    layers = {m for m in graph.find_children("branching_core") if graph.find_children(m)}
    public = {"branching_core", *layers}
    pairs = {
        (importer, imported)
        for importer in graph.find_descendants("forkdeck") | {"forkdeck"}
        for imported in graph.find_modules_directly_imported_by(importer)
        if imported.split(".")[0] == "branching_core"
    }
    targets = sorted({imported for _, imported in pairs})
    private = [t for t in targets if t not in public]
    print(f"importer -> engine pairs: {len(pairs)}")
    print(f"distinct engine modules: {len(targets)}")
    print(f"not public: {len(private)}")
    if verbose:
        for target in targets:
            print(("  " if target in public else "X ") + target)


if __name__ == "__main__":
    main("-v" in sys.argv)
