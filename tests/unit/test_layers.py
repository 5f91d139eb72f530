"""The import picture (docs/architecture.md, "Layers"): dependencies point one way.

Read from the source with `ast`, so it covers imports inside functions too. Run this file as a
script (`python tests/unit/test_layers.py`) to print the picture."""

from __future__ import annotations

import ast
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("governor", "reviews", "verification")

# Bottom to top. A module may import its own layer and the layers below it, never one above.
LAYERS = (
    "governor.domain",     # the rules: no Django, no database
    "governor.verify",     # the offline verifier: the domain only
    "models",              # governor, reviews and verification models
    "lib",                 # plumbing: errors, notify, waits, queue, blob store, the sandbox
    "governor.selectors",  # reads, and access across permission lines: they never write
    "governor.services",   # every write path
    "tasks",               # Celery tasks and what they deliver: call the services
    "governor.api",        # the agent API
    "pages",               # server-rendered pages: governor.pages, reviews' views and forms
    "governor",            # wiring: settings, urls, apps, admin, Celery, commands
)
SANDBOX = ("verification.sandbox", "verification.cgroups", "verification.overlay")
TASKS = ("governor.tasks", "reviews.tasks", "reviews.notifications", "verification.tasks")
# Imports inside a function, each with its reason; every other import sits at a module's top.
FUNCTION_LEVEL = {
    ("governor.apps", "governor.celery"): "ready(): the Celery app and system checks register",
    ("governor.apps", "governor.system_checks"): "ready(): the system checks register",
    ("governor.domain.workspace", "governor.domain.tree"): "tree imports workspace",
    ("governor.domain.changes", "governor.domain.documents"):
        "for the type checker only: the client package ships changes without typing_extensions",
}
DOMAIN_MAY_IMPORT = {"governor", "cryptography", "rfc8785", "yaml", "httpx", "typing_extensions",
                     "defusedxml"}
WRITES = {"save", "create", "bulk_create", "update", "delete", "get_or_create",
          "update_or_create", "bulk_update", "governor_event_append", "events_append"}


def layer(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] not in PACKAGES:
        return None
    second = parts[1] if len(parts) > 1 else ""
    if second == "models":
        return "models"
    if module.startswith(SANDBOX) or (parts[0] == "governor" and second == "lib"):
        return "lib"
    if module.startswith(TASKS):
        return "tasks"
    if parts[0] == "governor":
        if second in ("domain", "verify", "selectors", "services", "api"):
            return f"governor.{second}"
        return "pages" if second in ("pages", "forms") else "governor"
    if parts[0] == "reviews" and (second in ("forms", "urls") or second.endswith("views")):
        return "pages"
    return "governor"  # the apps' admin, apps and management commands: wiring


def modules() -> Iterator[tuple[str, Path]]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            yield name.removesuffix(".__init__"), path


def imports(path: Path) -> Iterator[tuple[str, bool]]:
    """(what is imported, whether at the module's top) for every absolute import in `path`."""
    tree = ast.parse(path.read_text())
    top = {id(node) for node in tree.body}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, id(node) in top
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:  # `from governor import celery` imports governor.celery
                yield f"{node.module}.{alias.name}", id(node) in top


def picture() -> Counter[tuple[str, str]]:
    edges: Counter[tuple[str, str]] = Counter()
    for name, path in modules():
        for target, _ in imports(path):
            source, destination = layer(name), layer(target)
            if destination is not None and source is not None and source != destination:
                edges[(source, destination)] += 1
    return edges


def test_every_import_points_down_the_layers() -> None:
    upward = [f"{source} imports {destination}" for source, destination in picture()
              if LAYERS.index(destination) > LAYERS.index(source)]
    assert upward == []


def test_the_domain_imports_nothing_from_django_or_the_layers_above() -> None:
    found = [f"{name} imports {target}" for name, path in modules()
             if name.startswith(("governor.domain", "governor.verify"))
             for target, _ in imports(path)
             if target.split(".")[0] == "django"
             or (layer(target) is not None and layer(target) != "governor.domain")
             or (target.split(".")[0] not in DOMAIN_MAY_IMPORT
                 and target.split(".")[0] not in sys.stdlib_module_names)]
    assert found == []


def test_imports_sit_at_the_top_of_modules() -> None:
    inside = sorted({(name, target) for name, path in modules()
                     for target, at_top in imports(path)
                     if not at_top and layer(target) is not None
                     and not any(name == module and f"{target}.".startswith(f"{imported}.")
                                 for module, imported in FUNCTION_LEVEL)})
    assert inside == []


def test_the_selectors_never_write() -> None:
    """A read never saves, creates, updates or deletes a row, nor appends an event."""
    found = []
    for name, path in modules():
        if layer(name) != "governor.selectors":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name)
                    and (node.func.attr if isinstance(node.func, ast.Attribute)
                         else node.func.id) in WRITES):
                found.append(f"{name}:{node.lineno}")
    assert found == []


# What a write is, read from a call's name: a row saved, created, updated or deleted (an event
# appended is one: `governor_event_append`, `events_append`, raw `executemany`), a row locked to
# be written, a task queued or a topic announced on commit, a file written, replaced or removed;
# or an item set in or taken from a mapping the caller passed (the login session a passkey
# ceremony keeps its challenge in). A name check, so a set's `.update(` counts too: it can let a
# read through, never fail a write.
WRITE_CALLS = WRITES | {"select_for_update", "_raw_delete", "executemany", "task_send_on_commit",
                        "announce_on_commit", "write", "unlink", "rmtree"}
WRITE_FUNCTIONS = {("os", "replace")}  # `replace` alone is also a string's


def _services_calls() -> dict[tuple[str, str], tuple[bool, set[tuple[str, str]]]]:
    """Each top-level function of governor/services/: (whether its body, nested functions
    included, calls a write; the services functions it calls, of its module or imported)."""
    graph = {}
    for name, path in modules():
        if layer(name) != "governor.services" or name == "governor.services":
            continue
        tree = ast.parse(path.read_text())
        local = {node.name for node in tree.body
                 if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}
        imported: dict[str, tuple[str, str]] = {}  # name here -> (module, function)
        services_modules: dict[str, str] = {}  # alias -> services module
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    if node.module == "governor.services":
                        services_modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                    elif node.module.startswith("governor.services."):
                        imported[alias.asname or alias.name] = (node.module, alias.name)
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            writes, calls = False, set()
            arguments = {argument.arg for argument in ast.walk(node.args)
                         if isinstance(argument, ast.arg)}
            for part in ast.walk(node):
                if (isinstance(part, ast.Subscript) and isinstance(part.ctx, ast.Store)
                        or isinstance(part, ast.Attribute) and part.attr == "pop") and (
                        isinstance(part.value, ast.Name) and part.value.id in arguments):
                    writes = True
                if isinstance(part, ast.Name) and part.id in local:
                    calls.add((name, part.id))
                elif isinstance(part, ast.Name) and part.id in imported:
                    calls.add(imported[part.id])
                elif (isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name)
                      and part.value.id in services_modules):
                    calls.add((services_modules[part.value.id], part.attr))
                if isinstance(part, ast.Call) and isinstance(part.func, ast.Attribute):
                    receiver = part.func.value
                    writes |= part.func.attr in WRITE_CALLS or (
                        isinstance(receiver, ast.Name)
                        and (receiver.id, part.func.attr) in WRITE_FUNCTIONS)
                elif isinstance(part, ast.Call) and isinstance(part.func, ast.Name):
                    writes |= part.func.id in WRITE_CALLS
            graph[(name, node.name)] = (writes, calls)
    return graph


def test_the_services_hold_only_write_paths() -> None:
    """Every public function of governor/services/ writes, itself or through a function it
    calls; a read belongs in governor/selectors/ (a pure one in governor/domain/), and a helper
    only a write path uses is private to its module (docs/architecture.md, "Who owns what")."""
    graph = _services_calls()
    writing = {function for function, (writes, _) in graph.items() if writes}
    grown = True
    while grown:
        reached = {function for function, (_, calls) in graph.items()
                   if function not in writing and calls & writing}
        writing |= reached
        grown = bool(reached)
    reads = sorted(f"{module}.{function}" for module, function in graph
                   if not function.startswith("_") and (module, function) not in writing)
    assert reads == []


PROFILE_STORE = "governor.services.profiles"
PROFILE_TABLES = {"VerifierProfile", "ProfileVersion", "OutcomeProfile", "OutcomeProfileVersion",
                  "versions"}


def test_one_store_writes_profiles_of_both_kinds_and_their_versions() -> None:
    """A profile of either kind, or a version of one, is written only by `profile_store`: a
    rule about receipts or versions lands once (docs/architecture.md, "Profiles")."""
    found = []
    for name, path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in WRITES):
                continue
            receiver = {part.id if isinstance(part, ast.Name) else part.attr
                        for part in ast.walk(node.func.value)
                        if isinstance(part, ast.Name | ast.Attribute)}
            if receiver & PROFILE_TABLES and name != PROFILE_STORE:
                found.append(f"{name}:{node.lineno}")
    assert found == []


def test_the_plumbing_never_imports_a_write_path_or_a_read() -> None:
    assert [(source, destination) for source, destination in picture()
            if source == "lib" and destination in ("governor.selectors", "governor.services")
            ] == []


def test_the_domain_holds_the_review_and_the_run_result_decisions() -> None:
    """`review_decide` applies `governor.domain.review.decide`; a run's result is decided by
    `governor.domain.verification` (the sandbox only reports how its process ended)."""
    services = (ROOT / "governor" / "services" / "reviews.py").read_text()
    assert "domain.decide(" in services
    runs = (ROOT / "governor" / "services" / "runs.py").read_text()
    sandbox = (ROOT / "verification" / "sandbox.py").read_text()
    assert "verification.run_result(" in runs or "run_result(" in runs
    assert "def _outcome" not in sandbox and "receipt(" not in sandbox


def test_the_domain_decides_when_a_contract_is_certified() -> None:
    """`governor.domain.attempts` alone decides it: `decide_attempt` (every check passed, and
    no person reviews the delivery) and `decide_delivery` (a person approved it). The services
    load the facts and write the verdict: none writes a terminal status of its own choosing
    (only the agent's `abstained`), nor compares the delivery-review setting itself."""
    contracts = (ROOT / "governor" / "services" / "contracts.py").read_text()
    reviews = (ROOT / "governor" / "services" / "reviews.py").read_text()
    assert "attempts.decide_attempt(" in contracts and "attempts.decide_delivery(" in reviews
    found = []
    for name, path in modules():
        if layer(name) in ("governor.domain", "governor.verify"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name):
                called = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
                found += [f"{name}:{node.lineno} {called}(status={keyword.value.value!r})"
                          for keyword in node.keywords
                          if called in ("terminal_write", "terminal_payload")
                          and keyword.arg == "status" and isinstance(keyword.value, ast.Constant)
                          and keyword.value.value != "abstained"]
            if isinstance(node, ast.Compare) and any(
                    isinstance(side, ast.Attribute) and side.attr == "delivery_review"
                    for side in (node.left, *node.comparators)):
                found.append(f"{name}:{node.lineno} compares delivery_review")
    assert found == []


def test_pages_read_through_the_services_never_through_the_api() -> None:
    assert ("pages", "governor.api") not in picture()


def test_the_services_write_the_export_with_the_domain_not_the_command_line_verifier() -> None:
    assert ("governor.services", "governor.verify") not in picture()


if __name__ == "__main__":
    for (source, destination), count in sorted(picture().items(),
                                               key=lambda item: LAYERS.index(item[0][0])):
        print(f"{source} -> {destination} ({count})")
