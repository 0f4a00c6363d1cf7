"""The import graph of tablesdk: imports point down the layers of docs/architecture.md, the
bundled emulator imports nothing of the client but ``_edm``, and the only cycles are the
factory methods the public API needs (:data:`ALLOWED`).

Every import counts: module level, ``if TYPE_CHECKING:`` blocks and imports inside functions
(a deferred import still ties the two modules together; deferring it only hides the cycle).
The implicit import of a module's parent packages is not counted: every submodule has it,
and a package ``__init__`` re-exporting its children is how the public modules are built.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "tablesdk"

DOC = ROOT / "docs" / "architecture.md"
_LAYER_TABLE_HEADER = "| layer (top first) | modules | owns |"


def layers_of_the_doc(text: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The layers table of docs/architecture.md as :data:`LAYERS`: its first two columns, bottom first.

    A module path is under ``tablesdk/``: ``x/`` is the package ``x`` and everything in it,
    ``x/y.py`` one module, ``x/__init__.py`` the package alone.
    """
    lines = text[text.index(_LAYER_TABLE_HEADER):].split("\n\n", 1)[0].splitlines()[2:]
    layers = []
    for line in lines:
        cells = line.split("|")
        layer, paths = cells[1].strip(), [p.strip("`") for p in cells[2].split(",")]
        patterns: list[str] = []
        for path in (p.strip().strip("`") for p in paths):
            dotted = ".".join([PACKAGE, *path.rstrip("/").removesuffix(".py").split("/")])
            if path.endswith("/"):
                patterns += [dotted, dotted + ".*"]
            else:
                patterns.append(dotted.removesuffix(".__init__"))
        layers.append((layer, tuple(patterns)))
    return tuple(reversed(layers))


#: The layers of docs/architecture.md, bottom first, read from its table (the one list). A module
#: may import from its own layer and the ones below it; a name a module needs from above belongs
#: lower down (or the module higher up). A pattern ending in ``.*`` covers a layer's folder.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = layers_of_the_doc(DOC.read_text(encoding="utf-8"))

#: The emulator stands in for the service, so it shares nothing with the client it is tested
#: against but the EDM types and limits.
EMULATOR = ("tablesdk.devstore", "tablesdk.devstore.*")
EMULATOR_MAY_IMPORT = ("tablesdk._entities._edm", "tablesdk._entities._edm_base", "tablesdk._entities._edm_specs")

#: The emulator's own layers, bottom first, checked like :data:`LAYERS` (it sits in "tools"
#: above). The operations take a ``Call`` and the storage and never the router: ``$batch``
#: is handed ``TableService._route`` as a callback, so nothing below the service imports it.
EMULATOR_LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = tuple(
    (layer, tuple(f"tablesdk.devstore.{name}" for name in names)) for layer, names in (
        ("emulator: values, bodies, storage", (
            "_errors", "_values", "_filter", "_auth", "_admin", "_storage", "_wire", "_multipart",
        )),
        ("emulator: a request", ("_request", "_url_parts", "_query_options", "_negotiation", "_error_answers")),
        ("emulator: operations", ("_table_operations", "_entity_reads", "_entity_writes", "_admin_requests")),
        ("emulator: batches", ("_batch_requests",)),
        ("emulator: the service", ("_service",)),
        ("emulator: the explorer page", ("_explorer",)),
        ("emulator: front ends", ("_server", "__main__")),
    )
) + (("emulator: public names", ("tablesdk.devstore",)),)

#: The one allow-list: imports that go up a layer or close a cycle, each because the public API
#: makes the lower object hand out the higher one.
ALLOWED: Mapping[tuple[str, str], str] = {
    ("tablesdk._core._account", "tablesdk._clients._client"): "CloudStorageAccount.create_cloud_table_client",
    ("tablesdk._core._account", "tablesdk.aio"): "CloudStorageAccount.create_async_cloud_table_client",
    ("tablesdk._clients._client", "tablesdk._unit_of_work._context"): "CloudTableClient.get_table_service_context",
    ("tablesdk._clients._client", "tablesdk._bulk_loading._bulk"): "CloudTableClient.bulk_insert",
    ("tablesdk.aio._client", "tablesdk.aio._context"): "AsyncCloudTableClient.get_table_service_context",
    ("tablesdk.aio._client", "tablesdk.aio._bulk"): "AsyncCloudTableClient.bulk_insert",
    ("tablesdk.aio._client", "tablesdk._bulk_loading._bulk"): "AsyncCloudTableClient.bulk_insert: its modes and result types",
    ("tablesdk._clients._client", "tablesdk._unit_of_work._table"): "CloudTableClient.get_table_reference",
    ("tablesdk._clients._client", "tablesdk._bulk_loading._deleting"): "CloudTableClient.delete_entities / count_entities",
    ("tablesdk.aio._client", "tablesdk.aio._deleting"): "AsyncCloudTableClient.delete_entities / count_entities",
    ("tablesdk._queries._query", "tablesdk._queries._parallel"): "TableQuery.iter_parallel / iter_parallel_segments hand out a parallel scan",
    ("tablesdk.aio._query", "tablesdk.aio._parallel"): "AsyncTableQuery.iter_parallel hands out a parallel scan",
    ("tablesdk._queries._query", "tablesdk._columns._arrow"): "TableQuery.to_arrow / iter_arrow_batches / to_pandas hand out columns",
    ("tablesdk.aio._query", "tablesdk._columns._arrow"): "AsyncTableQuery.to_arrow / iter_arrow_batches / to_pandas hand out columns",
    ("tablesdk.aio._query", "tablesdk._columns._arrow_since"): "AsyncTableQuery.to_arrow / to_pandas with since= hand out the changed rows' columns",
    ("tablesdk._queries._query", "tablesdk._columns._arrow_since"): "TableQuery.to_arrow / iter_arrow_batches / to_pandas with since= hand out the changed rows' columns",
    ("tablesdk._clients._client", "tablesdk._columns._arrow_write"): "CloudTableClient.write_arrow / write_pandas",
    ("tablesdk.aio._client", "tablesdk._columns._arrow_write"): "AsyncCloudTableClient.write_arrow / write_pandas",
    ("tablesdk.aio._client", "tablesdk.aio._table"): "AsyncCloudTableClient.get_table_reference",
    # A package __init__ in front of its own modules: get_format hands out the codecs, which
    # implement the PayloadFormat it defines; parse_error_body is its errors module's.
    ("tablesdk._formats", "tablesdk._formats.json"): "get_format",
    ("tablesdk._formats", "tablesdk._formats.atom"): "get_format",
    ("tablesdk._formats", "tablesdk._formats.errors"): "parse_error_body and the excerpt of a body it cannot decode",
}


@dataclass(frozen=True)
class Import:
    """One import statement of ``source`` that reaches module ``target``."""

    source: str
    target: str
    where: str  # path:line, for the failure message

    def __str__(self) -> str:
        return f"{self.source} -> {self.target} ({self.where})"


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports_of(name: str, path: Path, modules: Iterable[str], root: Path = ROOT) -> list[Import]:
    """Every import of a module of the package in the file of module ``name``, wherever it stands."""
    known = set(modules)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    where = path.relative_to(root).as_posix()
    found: list[Import] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names if alias.name in known]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            for alias in node.names:
                # ``from pkg import sub`` needs the submodule; ``from pkg import name`` the package.
                submodule = f"{origin}.{alias.name}"
                targets.append(submodule if submodule in known else origin)
        found.extend(Import(name, target, f"{where}:{node.lineno}") for target in targets if target in known and target != name)
    return list(dict.fromkeys(found))  # one per statement and module, however many names it imports


def import_graph(root: Path = ROOT) -> list[Import]:
    """All imports between modules of the package."""
    modules = module_files(root)
    return [edge for name, path in modules.items() for edge in imports_of(name, path, modules, root)]


def _matches(name: str, patterns: Iterable[str]) -> bool:
    return any(fnmatchcase(name, pattern) for pattern in patterns)


def layer_of(name: str, layers: tuple[tuple[str, tuple[str, ...]], ...] = LAYERS) -> int | None:
    """The index of ``name``'s layer (0 is the bottom), or None when no layer names it."""
    for index, (_, patterns) in enumerate(layers):
        if _matches(name, patterns):
            return index
    return None


def unplaced(
    modules: Iterable[str], layers: tuple[tuple[str, tuple[str, ...]], ...] = LAYERS, table: str = "LAYERS",
) -> list[str]:
    """A message for each module no layer names."""
    return [
        f"{name} is in no layer: add it to {table} in tests/unit/test_imports.py, in the layer of the module it was "
        f"split from or the one its imports allow, and to the layers table of docs/architecture.md"
        for name in modules
        if layer_of(name, layers) is None
    ]


def upward(
    edges: Iterable[Import],
    layers: tuple[tuple[str, tuple[str, ...]], ...] = LAYERS,
    allowed: Mapping[tuple[str, str], str] = ALLOWED,
) -> list[str]:
    """A message for each import of a module from a higher layer that the allow-list does not name."""
    found = []
    for edge in edges:
        low, high = layer_of(edge.source, layers), layer_of(edge.target, layers)
        if low is None or high is None or high <= low or (edge.source, edge.target) in allowed:
            continue
        found.append(
            f"upward import {edge}: layer {layers[low][0]!r} may not import from layer {layers[high][0]!r}; "
            f"move the name down to where both can reach it (docs/architecture.md, Layers)"
        )
    return found


def outside_emulator(edges: Iterable[Import]) -> list[str]:
    """A message for each import of the emulator from the client other than ``_edm``."""
    return [
        f"the emulator imports the client: {edge}; it may import only {', '.join(EMULATOR_MAY_IMPORT)}"
        for edge in edges
        if _matches(edge.source, EMULATOR)
        and not _matches(edge.target, EMULATOR)
        and edge.target not in EMULATOR_MAY_IMPORT
    ]


def cycles(edges: Iterable[Import], allowed: Mapping[tuple[str, str], str] = ALLOWED) -> list[str]:
    """One message per strongly connected group of modules, once the allowed imports are set aside,
    showing a shortest cycle through it with the import statements that make it."""
    by_source: dict[str, dict[str, Import]] = {}
    for edge in edges:
        if (edge.source, edge.target) not in allowed:
            by_source.setdefault(edge.source, {}).setdefault(edge.target, edge)
    groups = _strongly_connected(by_source)
    messages = []
    for group in groups:
        start = min(group)
        path = _shortest_cycle(start, group, by_source)
        steps = "\n  ".join(str(by_source[a][b]) for a, b in zip(path, path[1:]))
        messages.append(f"import cycle among {sorted(group)}:\n  {steps}")
    return messages


def _strongly_connected(graph: Mapping[str, Mapping[str, Import]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative; only groups of two or more modules."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []
    nodes = set(graph) | {t for targets in graph.values() for t in targets}
    for root in sorted(nodes):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, {}))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, {})))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(group)
    return groups


def _shortest_cycle(start: str, group: set[str], graph: Mapping[str, Mapping[str, Import]]) -> list[str]:
    """``start``, the modules of a shortest way back to it inside ``group``, and ``start`` again."""
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph.get(node, {})):
                if child not in group:
                    continue
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if child not in came_from:
                    came_from[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"{start} is in a strongly connected group but on no cycle")  # pragma: no cover


# ---------------------------------------------------------------- the package


@pytest.fixture(scope="module")
def graph() -> list[Import]:
    return import_graph()


def test_every_module_is_in_a_layer() -> None:
    problems = unplaced(module_files())
    assert not problems, "\n".join(problems)


def test_imports_point_down_the_layers(graph: list[Import]) -> None:
    problems = upward(graph)
    assert not problems, "\n".join(problems)


def test_the_emulator_imports_nothing_of_the_client_but_edm(graph: list[Import]) -> None:
    problems = outside_emulator(graph)
    assert not problems, "\n".join(problems)


def test_every_emulator_module_is_in_an_emulator_layer() -> None:
    emulator = [name for name in module_files() if _matches(name, EMULATOR)]
    problems = unplaced(emulator, EMULATOR_LAYERS, "EMULATOR_LAYERS")
    assert not problems, "\n".join(problems)


def test_the_emulator_imports_point_down_its_layers(graph: list[Import]) -> None:
    problems = upward(graph, EMULATOR_LAYERS, allowed={})
    assert not problems, "\n".join(problems)


def test_no_import_cycles_but_the_allowed_factories(graph: list[Import]) -> None:
    problems = cycles(graph)
    assert not problems, "\n".join(problems)


def test_every_allowed_import_is_still_made(graph: list[Import]) -> None:
    made = {(edge.source, edge.target) for edge in graph}
    stale = [f"{source} -> {target} ({why})" for (source, target), why in ALLOWED.items() if (source, target) not in made]
    assert not stale, "ALLOWED names imports the package no longer makes; remove them:\n" + "\n".join(stale)


# ---------------------------------------------------------------- the checks themselves


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_every_kind_of_import_is_read(tmp_path: Path) -> None:
    _write(tmp_path, {
        "tablesdk/__init__.py": "from ._a import A\n",
        "tablesdk/_a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._b import B\n",
        "tablesdk/_b.py": "def f():\n    from . import _c\n    import tablesdk._d\n",
        "tablesdk/_c.py": "from .sub import thing\n",
        "tablesdk/_d.py": "",
        "tablesdk/sub/__init__.py": "thing = 1\n",
        "tablesdk/sub/_e.py": "from .. import _d\nfrom ..sub import thing\n",
    })
    edges = {(e.source, e.target) for e in import_graph(tmp_path)}
    assert edges == {
        ("tablesdk", "tablesdk._a"),
        ("tablesdk._a", "tablesdk._b"),
        ("tablesdk._b", "tablesdk._c"),
        ("tablesdk._b", "tablesdk._d"),
        ("tablesdk._c", "tablesdk.sub"),
        ("tablesdk.sub._e", "tablesdk._d"),
        ("tablesdk.sub._e", "tablesdk.sub"),
    }


def test_an_upward_import_a_cycle_and_an_unknown_module_are_reported() -> None:
    layers = (("low", ("m.low",)), ("high", ("m.high", "m.other")))
    edges = [Import("m.low", "m.high", "low.py:3"), Import("m.high", "m.low", "high.py:1"), Import("m.high", "m.other", "high.py:2")]
    [up] = upward(edges, layers, allowed={})
    assert "m.low -> m.high (low.py:3)" in up and "'low' may not import from layer 'high'" in up
    assert upward(edges, layers, allowed={("m.low", "m.high"): "factory"}) == []
    [cycle] = cycles(edges, allowed={})
    assert "m.high -> m.low (high.py:1)" in cycle and "m.low -> m.high (low.py:3)" in cycle
    assert cycles(edges, allowed={("m.low", "m.high"): "factory"}) == []
    [unknown] = unplaced(["m.low", "m.new"], layers)
    assert unknown.startswith("m.new is in no layer: add it to LAYERS")


def test_a_longer_cycle_is_shown_step_by_step() -> None:
    edges = [Import("a", "b", "a:1"), Import("b", "c", "b:1"), Import("c", "a", "c:1"), Import("c", "d", "c:2")]
    [cycle] = cycles(edges, allowed={})
    assert cycle.splitlines()[1:] == ["  a -> b (a:1)", "  b -> c (b:1)", "  c -> a (c:1)"]


def test_the_emulator_rule() -> None:
    edges = [
        Import("tablesdk.devstore._values", "tablesdk._entities._edm", "v:1"),
        Import("tablesdk.devstore._values", "tablesdk._entities._entity", "v:2"),
        Import("tablesdk.devstore", "tablesdk.devstore._server", "i:1"),
    ]
    [problem] = outside_emulator(edges)
    assert "tablesdk._entities._entity (v:2)" in problem
