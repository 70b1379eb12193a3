"""The package's layers, read from its source with `ast`, lazy imports (inside functions) counted:
each subpackage imports only its own modules and the layers below it, nothing imports in a
circle, and torch, jinja2 and mkdocs stay out of the layers a search runs through.

    core          util, model, locate, cache, load: imports nothing else of kb_tools
    search lint verify snippets watch      over core only (each its own extension point)
    render        an entry for readers: over the layers above
    site          the docs site: over render
    mcp           mcp_server and confined (what it may read): the MCP server, over render and below
    commands      one module per command: over everything but the top (`kb mcp` starts the server)
    top           cli, fastpath, launcher, docs, __main__

This test, not comments, keeps the start-up budget: a plain `kb search` loads commands/search,
search/ and core/ only (tests/test_cli.py times it and lists the modules it may import).
"""
from __future__ import annotations

import ast
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "kb_tools")

LAYER_OF = {"core": 0, "search": 1, "lint": 1, "verify": 1, "snippets": 1, "watch": 1,
            "render": 2, "site": 3, "mcp": 4, "commands": 5}
TOP = 6
MCP_MODULES = ("kb_tools.mcp_server", "kb_tools.confined")
# Heavy third-party packages and the only places that may import them.
HEAVY = {"torch": ("kb_tools.snippets", "kb_tools.watch"), "jinja2": ("kb_tools.site",),
         "markupsafe": ("kb_tools.site",), "mkdocs": ("kb_tools.site",), "mcp": ("kb_tools.mcp_server",),
         "pydantic": ("kb_tools.mcp_server",), "mcp_types": ("kb_tools.mcp_server",)}


def modules() -> dict:
    """Dotted module name -> its file, for every module of the package."""
    out = {}
    for top, dirs, files in os.walk(PACKAGE):
        dirs[:] = [d for d in dirs if d not in ("__pycache__", "_data", "embeddings")]
        for name in files:
            if name.endswith(".py"):
                rel = os.path.relpath(os.path.join(top, name), ROOT)[:-3].replace(os.sep, ".")
                out[rel[:-len(".__init__")] if rel.endswith(".__init__") else rel] = os.path.join(top, name)
    return out


MODULES = modules()


def imports(path: str, name: str) -> list:
    """(imported module, line, lazy) for every import in the file, at any depth."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    package = name if path.endswith("__init__.py") else name.rsplit(".", 1)[0]
    found = []

    def visit(node, lazy):
        for child in ast.iter_child_nodes(node):
            inner = lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                found.extend((a.name, child.lineno, inner) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = package.split(".")
                    base = ".".join(parts[:len(parts) - child.level + 1] + ([base] if base else []))
                for a in child.names:  # `from kb_tools.search import rank` names a module
                    full = f"{base}.{a.name}"
                    found.append((full if full in MODULES else base, child.lineno, inner))
            visit(child, inner)
    visit(tree, False)
    return found


def group(module: str) -> str:
    if module == "kb_tools":
        return "face"  # the package's own __init__: its version and folder, imported by every layer
    if module in MCP_MODULES:
        return "mcp"
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYER_OF else "top"


def layer(module: str) -> int:
    return -1 if group(module) == "face" else LAYER_OF.get(group(module), TOP)


EDGES = {m: [(i, line, lazy) for i, line, lazy in imports(p, m)] for m, p in MODULES.items()}


def own_edges():
    for module, found in EDGES.items():
        for target, line, lazy in found:
            if target in MODULES and target != module:
                yield module, target, line, lazy


def test_the_walk_finds_the_package():
    assert {"kb_tools.core.load", "kb_tools.search.rank", "kb_tools.lint.engine", "kb_tools.cli",
            "kb_tools.commands.search", "kb_tools.render.sections"} <= set(MODULES)
    lazy = [e for e in own_edges() if e[3]]
    assert lazy, "lazy imports are counted"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if 0 <= layer(m) < TOP))
def test_a_layer_imports_only_itself_and_the_layers_below(module):
    bad = []
    for source, target, line, lazy in own_edges():
        if source != module:
            continue
        same_group = group(source) == group(target)
        if not same_group and layer(target) >= layer(source):
            bad.append(f"{MODULES[source]}:{line}: {source} imports {target}{' (lazily)' if lazy else ''}")
    assert not bad, "\n".join(bad)


def test_core_imports_nothing_of_kb_tools_above_it():
    above = [(s, t, line) for s, t, line, _ in own_edges() if group(s) == "core" and group(t) not in ("core", "face")]
    assert not above, above


@pytest.mark.parametrize("package", sorted(HEAVY))
def test_heavy_packages_stay_where_they_are_needed(package):
    allowed = HEAVY[package]
    bad = [f"{MODULES[m]}:{line}: imports {target}" for m, found in EDGES.items() for target, line, _ in found
           if (target == package or target.startswith(package + ".")) and not m.startswith(allowed)]
    assert not bad, "\n".join(bad)


def test_search_and_lint_never_reach_site_commands_render_or_torch():
    for source, target, line, _ in own_edges():
        if group(source) in ("search", "lint", "core"):
            assert group(target) not in ("site", "commands", "render", "mcp", "top"), (source, target, line)


def test_no_module_imports_in_a_circle():
    graph = {m: sorted({t for s, t, _, _ in own_edges() if s == m}) for m in MODULES}
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    state, stack, cycles = {}, [], []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in graph[node]:
            if nxt == "kb_tools":
                continue
            if state.get(nxt) == "open":
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"
    for node in graph:
        if node not in state:
            visit(node)
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def test_a_planted_upward_import_is_found(tmp_path, monkeypatch):
    """The walk reads lazy imports, relative ones and `from package import module` as what they are."""
    planted = tmp_path / "planted.py"
    planted.write_text("from kb_tools.search import rank\n"
                       "def later():\n"
                       "    from kb_tools.site.build import render_pages\n"
                       "    import kb_tools.commands.output\n")
    found = imports(str(planted), "kb_tools.core.planted")
    assert ("kb_tools.search.rank", 1, False) in found
    assert ("kb_tools.site.build", 3, True) in found and ("kb_tools.commands.output", 4, True) in found
    assert all(layer(t) > layer("kb_tools.core.util") for t, _, _ in found)
