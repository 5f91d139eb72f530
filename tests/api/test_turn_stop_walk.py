"""The walk of a turn-stop from its route to the checks (issue 36 item 2): the workspace is hashed
once, in one call from the attempt into `governor/services/trees.py`, and the tree passed down.
Run with `-s` to print the walk, the figure docs/architecture.md gives.

How it is counted: every Python call into a function of governor/, reviews/ or verification/
(`sys.setprofile` "call" events), from entering the route `governor.api.contracts.turn_stop`
until `governor.domain.checks.evaluate_checks` is entered. Its caller is the nearest frame of
those packages, and it counts only when every frame between them is the standard library's
(`contextlib`...): Django's ORM calling a field's `from_db_value` is no step a reader takes. A
crossing is a call from one module into another, each (caller, callee) pair of functions once; a
layer crossing, one between two layers of tests/unit/test_layers.py. A generator resumed is not
called again."""

from __future__ import annotations

import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from tests.api.test_contracts import readme_contract
from tests.api.test_snapshot_sessions import upload_directory
from tests.conftest import AgentClient
from tests.unit.test_layers import layer

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("private_store")]
ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("governor", "reviews", "verification")
STDLIB = sysconfig.get_paths()["stdlib"]
ROUTE = ("governor.api.contracts", "turn_stop")
CHECKS = ("governor.domain.checks", "evaluate_checks")
TREES = "governor.services.trees"


def module_of(frame: FrameType) -> str | None:
    path = Path(frame.f_code.co_filename)
    if not path.is_relative_to(ROOT) or path.relative_to(ROOT).parts[0] not in PACKAGES:
        return None
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def caller_of(frame: FrameType) -> FrameType | None:
    """The nearest frame of the packages calling `frame`, through the standard library only."""
    caller = frame.f_back
    while caller is not None and module_of(caller) is None:
        filename = caller.f_code.co_filename
        if not filename.startswith(STDLIB) or "site-packages" in filename:
            return None  # called back by Django, ninja or pydantic
        caller = caller.f_back
    return caller


@dataclass
class Walk:
    crossings: dict[tuple[str, str, str, str], None] = field(default_factory=dict)
    trees_entered: list[str] = field(default_factory=list)  # from the attempt, to the checks
    hashes: int = 0  # `hash_tree` calls: each hash of a tree or an environment directory
    started: bool = False
    reached: bool = False
    generators: set[int] = field(default_factory=set)

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        callee = module_of(frame) if event == "call" else None
        if callee is None:
            return
        code = frame.f_code
        if code.co_flags & 0x20:  # a generator: counted when it starts, not when resumed
            if id(frame) in self.generators:
                return
            self.generators.add(id(frame))
        if (callee, code.co_name) == ROUTE:
            self.started = True
        caller = caller_of(frame)
        if not self.started or self.reached or caller is None:
            return
        source = module_of(caller)
        assert source is not None
        self.hashes += code.co_name == "hash_tree"
        if source != callee:
            self.crossings[(source, caller.f_code.co_qualname, callee, code.co_qualname)] = None
            if callee == TREES:
                self.trees_entered.append(code.co_qualname)
        self.reached = (callee, code.co_name) == CHECKS

    def layer_crossings(self) -> int:
        return sum(layer(source) != layer(callee) for source, _, callee, _ in self.crossings)


def walked(agent: AgentClient, session_id: str, label: str, body: Any = None) -> Walk:
    walk = Walk()
    sys.setprofile(walk)
    try:
        response = agent.post(f"/sessions/{session_id}/turn-stop", body)
    finally:
        sys.setprofile(None)
    assert response.status_code == 200, response.content
    assert walk.reached, "the turn-stop evaluated no check"
    print(f"\n{label}: {len(walk.crossings)} crossings, {walk.layer_crossings()} between layers")
    for source, caller, callee, function in walk.crossings:
        marker = "L" if layer(source) != layer(callee) else " "
        print(f"  {marker} {source}.{caller} -> {callee}.{function}")
    return walk


def assert_hashed_once(walk: Walk) -> None:
    """One hash, in one call into trees.py (beside it, rules §17.9 reads the hashed tree's own
    `.gitattributes` files through the same hashed workspace: no second hash)."""
    assert walk.hashes == 1
    assert [name for name in walk.trees_entered
            if name not in ("tree_blobs_keep.<locals>.missing",
                            "HashedWorkspace.checkout_converted")
            ] == ["workspace_hashed"]


def test_a_path_sessions_turn_stop_hashes_its_workspace_once(
        agent: AgentClient, session: dict[str, Any], workspace: Path) -> None:
    begun = agent.post(f"/sessions/{session['id']}/contracts", readme_contract(max_attempts=3))
    assert begun.status_code == 201, begun.content
    assert_hashed_once(walked(agent, session["id"], "repair (the tree begin recorded)"))
    (workspace / "README.md").write_text("# Demo\n\n## Install\n")
    assert_hashed_once(walked(agent, session["id"], "certified (a new tree, its blobs kept)"))


def test_a_snapshot_sessions_turn_stop_hashes_its_copy_once(
        agent: AgentClient, tmp_path: Path) -> None:
    """The private copy is hashed to check it is the snapshot's tree, and that tree is the one
    judged (it was hashed twice)."""
    session = str(agent.post("/sessions", {"workspace": {"kind": "snapshot"}}).json()["id"])
    remote = tmp_path / "laptop"
    remote.mkdir()
    (remote / "main.py").write_text("print('hi')\n")
    tree = upload_directory(agent, session, remote)["tree"]
    begun = agent.post(f"/sessions/{session}/contracts", {**readme_contract(), "tree": tree})
    assert begun.status_code == 201, begun.content
    assert_hashed_once(walked(agent, session, "snapshot, repair", {"tree": tree}))
