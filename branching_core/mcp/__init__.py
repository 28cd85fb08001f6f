"""forkdeck as an MCP server: any MCP client gets copy-on-write branches.

``forkdeck mcp [PATH]`` (``branching_core.cli.mcp``) serves one workspace over stdio or
streamable HTTP with the tools ``branch_create``, ``branch_list``, ``branch_run``,
``branch_diff``, ``branch_commit``, ``branch_abort`` and ``explore``.

A front door: it uses only the engine's public names (``from branching_core import``),
which an import-linter contract checks. Modules: ``bounds`` (argument checks, size
limits), ``results`` (typed tool results), ``diff`` (a branch's changes for a model),
``lifecycle`` (who owns which branch, kept branches), ``tools`` (what each tool does),
``server`` (the tools on the MCP SDK), ``transport`` (stdio, HTTP, signals).
"""
