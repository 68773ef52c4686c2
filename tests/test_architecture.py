"""The house: layers that only look down, no import circles, small files.

The import graph of `harness/`, `systems/` and `workloads/` is read from the source
(ast, every import, those inside functions included), so a lazy import cannot hide
a circle or a layer violation. docs/architecture.md explains the layers.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("harness", "systems", "workloads")
MAX_LINES = 400
LONG_FILES: dict[str, str] = {}  # path -> why it may be longer (none today)

# A module may import its own layer and the layers below it (a lower rank), never
# one above. Modules of equal rank in different packages do not import each other.
RANKS = {
    "harness.core": 0,  # the contract, the trace, metrics, config, registries, plumbing
    "systems": 1,  # scheduling policies, against the contract only
    "workloads": 1,  # prompt sources, profiles, datasets and verifiers
    "harness.shared": 2,  # what both runtimes are built on
    "harness.sim": 3,  # the simulated runtime
    "harness.live": 3,  # the live runtime
    "harness.run": 4,  # one configuration, checked and run on its runtime
    "harness.analysis": 4,  # traces in, tables and figures out
    "harness.imports": 4,  # other systems' logs in, traces out
    "harness.studies": 5,  # many runs for a purpose
    "harness.cli": 6,  # the commands
    "harness.main": 7,  # the entry point
}
ROOT_MODULE = "harness"  # harness/__init__.py (the version) counts as core
SYSTEMS_MAY_IMPORT = {"harness.core.runtime", "harness.core.registry"}
CLI_SHARED = {"harness.cli.common", "harness.cli.tables", "harness.cli.errors"}


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def import_graph(known: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the project modules it imports (a `from pkg import mod` names pkg.mod)."""
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        deps: set[str] = set()
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                deps.update(filter(None, (_resolve(a.name, known) for a in node.names)))
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([node.module] if node.module else []))
                for alias in node.names:
                    target = _resolve(f"{base}.{alias.name}", known) or _resolve(base, known)
                    if target:
                        deps.add(target)
        deps.discard(name)
        graph[name] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def layer(module: str) -> str:
    """The layer (a key of RANKS) a module belongs to; '' when it belongs to none."""
    if module == ROOT_MODULE:
        return "harness.core"
    parts = module.split(".")
    for i in range(len(parts), 0, -1):
        if ".".join(parts[:i]) in RANKS:
            return ".".join(parts[:i])
    return ""


def violations(graph: dict[str, set[str]]) -> list[str]:
    out = []
    for module, deps in sorted(graph.items()):
        mine = layer(module)
        for dep in sorted(deps):
            theirs = layer(dep)
            if theirs == mine or not (mine and theirs):
                continue
            if RANKS[theirs] >= RANKS[mine]:
                out.append(f"{module} ({mine}) imports {dep} ({theirs})")
    return out


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(modules())


def test_the_cycle_finder_sees_a_circle() -> None:
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(g) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_layer_check_sees_an_upward_import() -> None:
    g = {"harness.core.trace": {"harness.sim.runtime"}, "harness.sim.runtime":
         {"harness.core.trace"}, "systems.cgp": {"harness.core.runtime"}}
    assert violations(g) == ["harness.core.trace (harness.core) imports harness.sim.runtime "
                             "(harness.sim)"]


def test_graph_reads_lazy_and_package_imports(graph: dict[str, set[str]]) -> None:
    # `from harness.cli import run` inside the assembler names the module, and
    # the runner's `from harness import __version__` names the package
    assert "harness.cli.run" in graph["harness.cli.app"]
    assert "harness" in graph["harness.shared.runner"]


def test_no_import_cycles(graph: dict[str, set[str]]) -> None:
    assert cycles(graph) == []


def test_every_module_has_a_layer(graph: dict[str, set[str]]) -> None:
    flat = [m for m in graph if not layer(m)]
    assert flat == [], f"place these in a layer (docs/architecture.md): {flat}"


def test_layers_only_look_down(graph: dict[str, set[str]]) -> None:
    assert violations(graph) == []


def test_runtimes_do_not_know_each_other(graph: dict[str, set[str]]) -> None:
    for a, b in (("harness.sim", "harness.live"), ("harness.live", "harness.sim"),
                 ("systems", "workloads"), ("workloads", "systems"),
                 ("harness.run", "harness.analysis"), ("harness.analysis", "harness.run")):
        crossing = [(m, d) for m, deps in graph.items() if layer(m) == a
                    for d in deps if layer(d) == b]
        assert crossing == [], f"{a} imports {b}: {crossing}"


def test_systems_use_only_the_contract(graph: dict[str, set[str]]) -> None:
    outside = {(m, d) for m, deps in graph.items() if layer(m) == "systems"
               for d in deps if layer(d) != "systems" and d not in SYSTEMS_MAY_IMPORT}
    assert outside == set()


def test_systems_wait_only_on_the_runtime() -> None:
    """No system imports asyncio: it waits on what the runtime gives it (`rt.serve`,
    `rt.event`, `rt.queue`, `rt.slots`, `rt.first`, `rt.gather`, `rt.sleep`), so the
    simulator may drive systems on its own event heap (docs/simulated-core.md)."""
    users = set()
    for path in sorted((ROOT / "systems").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            if any(name.split(".")[0] == "asyncio" for name in names):
                users.add(path.name)
    assert users == set()


def test_commands_are_assembled_in_one_place(graph: dict[str, set[str]]) -> None:
    importers = {m for m, deps in graph.items() if "harness.cli.app" in deps}
    assert importers == {"harness.main"}
    commands = [m for m in graph if layer(m) == "harness.cli"
                and m not in CLI_SHARED | {"harness.cli", "harness.cli.app"}]
    assert "harness.cli.run" in commands
    for module in commands:  # a command module uses the shared parts, not another command
        others = {d for d in graph[module] if layer(d) == "harness.cli"} - CLI_SHARED
        assert others == set(), f"{module} imports {others}"


def test_files_are_small() -> None:
    long = {}
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            rel = str(path.relative_to(ROOT))
            n = len(path.read_text().splitlines())
            if n > MAX_LINES and rel not in LONG_FILES:
                long[rel] = n
    assert long == {}, f"over {MAX_LINES} lines: {long}"
