"""The database answers the evidence questions of rules 4.9–4.10 exactly as the in-memory
reference (`LogEvidence`) does over the same log."""

from __future__ import annotations

from governor.domain.checks import LogEvidence
from governor.models import Event, Session, SessionState
from governor.selectors.evidence import DatabaseEvidence
from tests.conftest import AgentClient
from tests.harness_builders import Trace


def test_database_evidence_agrees_with_the_in_memory_reference(
    agent: AgentClient, session: dict
) -> None:
    trace = Trace()
    trace.start_turn()
    for n in range(12):
        trace.tool(["bash", "edit", "mcp__governor__reliability_verify"][n % 3],
                   f'{{"cmd": "step {n}"}}', ok=n % 4 != 1)
    trace.say().end_turn()
    assert agent.append(session["id"], trace.flush()).status_code == 200
    row = Session.objects.get(pk=session["id"])
    events = [{"seq": e.seq, "type": e.type, "origin": e.origin, "data": e.data}
              for e in Event.objects.filter(session=row)]
    memory = LogEvidence(events)
    database = DatabaseEvidence(row, SessionState.objects.get(session=row))
    for after in (-1, 5, 20, 60):
        for tool in ("bash", "edit", "nope"):
            for needle in (None, "step 1", '"cmd"', "STEP"):
                for limit in (1, 3, 100):
                    assert (database.tool_success_count(tool, after, needle, limit)
                            == memory.tool_success_count(tool, after, needle, limit))
            assert database.tool_call_count(tool, after) == memory.tool_call_count(tool, after)
        assert database.first_tool_error(after) == memory.first_tool_error(after)
        assert (database.mutation_boundary(after, "tests")
                == memory.mutation_boundary(after, "tests"))
