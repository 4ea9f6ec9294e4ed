"""Rules about the shape of the code: the import graph of src/hearth has no cycle outside the
wiring, and the core works without any optional extra installed.

The graph is read with ``ast``, so imports inside functions count (a lazy import still ties two
modules together), and so do imports under ``if TYPE_CHECKING:``: a type hint ties two modules
together as surely as a call does.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = "hearth"


def _modules() -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package)."""
    found = {}
    for path in (SRC / PACKAGE).rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        found[".".join(parts)] = (path, is_package)
    return found


# The wiring assembles everything, so it may import any module: the package's front door, the
# scope and the wiring table, and the edges that face the outside (the HTTP server, the CLI and the
# MCP server, each a face over a ``Scope``). Nothing else imports any of them; every module below
# takes a ``records.context.Context`` instead.
WIRING = {"hearth", "hearth.__main__", "hearth.scope", "hearth.wiring"}
EDGES = ("hearth.server", "hearth.cli", "hearth.mcp")


def in_wiring(module: str) -> bool:
    return module in WIRING or any(module == edge or module.startswith(edge + ".") for edge in EDGES)


def _imports(name: str, path: Path, is_package: bool, modules: dict) -> set[str]:
    """The modules of this package that ``name`` imports, for types only included."""
    package = name if is_package else name.rpartition(".")[0]
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:
                # `from pkg import module` depends on the module; `from pkg import name` on pkg.
                sub = f"{source}.{alias.name}"
                out.add(sub if sub in modules else source)
        else:
            for child in ast.iter_child_nodes(node):
                visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
    return {m for m in out if m in modules and m != name}


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, is_package, modules) for name, (path, is_package) in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_the_graph_reader_sees_lazy_and_type_only_imports():
    graph = import_graph()
    assert "hearth.scope" in graph["hearth"]
    assert "hearth.records.context" in graph["hearth.thread.send"]  # only under TYPE_CHECKING there
    assert "hearth.retrieval.semantic" in graph["hearth.wiring"]  # only inside a function there
    # A cycle made through an import inside a function is still a cycle.
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_nothing_below_the_wiring_imports_it():
    graph = import_graph()
    found = {m: sorted(d for d in deps if in_wiring(d)) for m, deps in graph.items() if not in_wiring(m)}
    found = {m: deps for m, deps in found.items() if deps}
    assert not found, f"modules below the wiring that import it (take a Context instead): {found}"


def test_no_import_cycles_outside_the_wiring():
    graph = import_graph()
    found = [c for c in cycles(graph) if not all(in_wiring(m) for m in c)]
    detail = "\n".join(
        " <-> ".join(c) + "\n" + "\n".join(f"    {m} -> {sorted(graph[m] & set(c))}" for m in c) for c in found)
    assert not found, f"import cycles in src/{PACKAGE}:\n{detail}"



ROOT_LIMIT = 10  # the package root holds the public API and the wiring; everything else sits in its area


def test_the_package_root_holds_at_most_ten_modules_and_every_area_is_a_package():
    root = sorted(p.name for p in (SRC / PACKAGE).glob("*.py"))
    assert len(root) <= ROOT_LIMIT, root
    areas = {p.name for p in (SRC / PACKAGE).iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert {"records", "thread", "prompt", "continuity", "lorebook", "memory", "outreach", "interop", "ops",
            "store", "retrieval", "providers", "server", "cli", "mcp"} <= areas
    assert all((SRC / PACKAGE / area / "__init__.py").exists() for area in areas)

# -- a bare install: the core needs none of the extras ---------------------------------------------
OPTIONAL = ("fastapi", "uvicorn", "starlette", "jinja2", "openai", "anthropic", "onnxruntime", "tokenizers",
            "mcp", "twilio", "websockets")


def _run(code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env={**os.environ, "HEARTH_HOME": str(tmp_path / "home")})


def test_g1_the_library_and_cli_import_and_chat_offline_without_any_extra(tmp_path):
    """hearth/__init__, the engine, every layer and the CLI load, and an offline chat runs, without
    importing the server, a provider SDK or the local model's runtime."""
    result = _run(f"""
        import sys
        import hearth, hearth.cli, hearth.wiring, hearth.scope
        from hearth import Hearth, Settings
        with Hearth(Settings.resolve({{"provider": "offline"}})) as h:
            me = h.scope()
            chat = me.conversations.create()
            me.send(chat.id, "Good morning")
            me.search("morning", embed=False)
        print(sorted(m for m in {OPTIONAL!r} if m in sys.modules))
    """, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize("blocked, action, extra", [
    ("openai", "provider_from_settings(Settings.resolve({'provider': 'openai', 'openai_api_key': 'k'}))", "openai"),
    ("anthropic", "provider_from_settings(Settings.resolve({'provider': 'anthropic', 'anthropic_api_key': 'k'}))",
     "anthropic"),
    ("fastapi", "import hearth.server", "server"),
    ("onnxruntime", "LocalEmbedder().load()", "local"),
    ("onnx", "LocalEmbedder().load_queries()", "local"),
])
def test_g1_a_missing_extra_is_one_config_error_naming_it(tmp_path, blocked, action, extra):
    result = _run(f"""
        import sys
        sys.modules[{blocked!r}] = None  # as if the package were not installed
        from hearth import ConfigError, Settings
        from hearth.providers import provider_from_settings
        from hearth.retrieval.embedder import LocalEmbedder
        try:
            {action}
        except ConfigError as exc:
            print(exc)
    """, tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"pip install 'hearth[{extra}]'" in result.stdout
