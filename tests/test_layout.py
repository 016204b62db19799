"""The package layout shows the architecture: layers import downwards only, with no cycles."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SERVICE = Path(__file__).resolve().parent.parent / "service"
ARCHITECTURE = (SERVICE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
DOMAIN = ("db", "providers", "knowledge", "retrieval", "tickets")


def module_name(path: Path) -> str:
    """``service/web/api.py`` → ``service.web.api``; a package's ``__init__`` is the package."""
    parts = ("service", *path.relative_to(SERVICE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every ``service.…`` module this file imports, at any depth of the file."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("service"):
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("service")}
    return found


GRAPH = {module_name(path): imports_of(path) for path in SERVICE.rglob("*.py")}
# Bottom to top: a module imports its own layer and those before it, never one after. ``service`` itself (the
# package's __init__, the public Python API) is the top; runtime wires config, db, providers and knowledge for
# the layers above, which take it as an argument.
LAYERS = (
    ("service.config", "service.config_table"), ("service.links",), ("service.db",), ("service.providers",), ("service.validation",), ("service.knowledge",),
    ("service.runtime",), ("service.retrieval",), ("service.gate",),
    # Outbound mail (compose, outbox, worker) is queued by the ticket use cases; the inbound adapters drive them.
    ("service.mail",), ("service.tickets",), ("service.intake",), ("service.privacy",), ("service.accounts",),
    ("service.public", "service.rag"), ("service.web", "service.widget"), ("service.cli",), ("service",),
)


def layer_of(module: str) -> int:
    """The index in LAYERS of the most specific entry naming ``module`` or a package holding it."""
    matches = [(len(prefix), index) for index, prefixes in enumerate(LAYERS) for prefix in prefixes
               if module == prefix or (prefix != "service" and module.startswith(prefix + "."))]
    assert matches, f"{module} belongs to no layer: add it to LAYERS"
    return max(matches)[1]


def test_the_import_graph_has_no_cycles():
    modules = set(GRAPH)
    edges = {name: {dep for dep in deps if dep in modules and dep != name} for name, deps in GRAPH.items()}
    state: dict[str, str] = {}

    def visit(name: str, trail: list[str]) -> None:
        state[name] = "open"
        for dep in sorted(edges[name]):
            assert state.get(dep) != "open", "import cycle: " + " -> ".join([*trail, name, dep])
            if dep not in state:
                visit(dep, [*trail, name])
        state[name] = "done"

    for name in sorted(modules):
        if name not in state:
            visit(name, [])


def test_item_11_layers_import_downwards_only():
    upward = sorted(f"{name} -> {dep}" for name, deps in GRAPH.items() for dep in deps
                    if dep in GRAPH and dep != name and layer_of(dep) > layer_of(name))
    assert upward == []


@pytest.mark.parametrize("module, dependency", [
    ("service.validation", "service.retrieval.ranking"), ("service.runtime", "service.retrieval.search"),
    ("service.db.models", "service.web.app"),
    # Item 11 (issue 24): outbound mail sits below the tickets, the inbound adapters above them.
    ("service.mail.outbox", "service.tickets.work"), ("service.tickets.work", "service.intake.receive"),
    ("service.mail.worker", "service.intake.parse"),
])
def test_item_11_the_layer_check_would_catch_an_upward_import(module, dependency):
    assert layer_of(dependency) > layer_of(module)


@pytest.mark.parametrize("layer", DOMAIN)
def test_domain_layers_never_import_the_web_or_the_command_line(layer):
    offenders = {name: sorted(dep for dep in deps if dep.startswith(("service.web", "service.cli")))
                 for name, deps in GRAPH.items() if name.startswith(f"service.{layer}")}
    assert {name: deps for name, deps in offenders.items() if deps} == {}


def test_the_web_layer_never_imports_the_command_line():
    assert {name for name, deps in GRAPH.items()
            if name.startswith("service.web") and any(d.startswith("service.cli") for d in deps)} == set()


@pytest.mark.parametrize("package", sorted(p.parent for p in SERVICE.rglob("__init__.py")))
def test_every_package_says_what_lives_there_and_the_architecture_page_maps_it(package):
    assert ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8")))
    if package.parent == SERVICE:
        assert f"  {package.name}/" in ARCHITECTURE, f"docs/architecture.md does not list service/{package.name}/"


# The fusion formulas in Python are the oracle tests/test_hybrid.py checks the SQL against: a purpose, not dead.
SQL_ORACLES = {"convex_relevance", "rrf_relevance"}


def test_item_11_no_ranking_function_is_kept_alive_only_by_tests():
    ranking = SERVICE / "retrieval" / "ranking.py"
    functions = [node.name for node in ast.parse(ranking.read_text(encoding="utf-8")).body
                 if isinstance(node, ast.FunctionDef) and node.name not in SQL_ORACLES]
    code = "\n".join(path.read_text(encoding="utf-8") for path in SERVICE.rglob("*.py") if path != ranking)
    assert [name for name in functions if name not in code] == []
