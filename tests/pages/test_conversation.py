"""What a reviewer reads of the work itself (issue 15, item 1): the person's request beside the
agent's reading of it on the intent page, and the timeline's conversation view — messages, tool
calls with their arguments and results (collapsed, capped, escaped), verifier runs and verdicts
in order, one query whatever their number."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from governor.domain.conversation import TEXT_CHARS
from governor.models import Project
from tests.conftest import AgentClient
from tests.harness_builders import Trace
from tests.pages import contract_body, reviewer_client
from tests.pages.test_session_timeline import certified_session, timeline

pytestmark = pytest.mark.django_db

ASKED = "Add an Install section to README.md; keep the rest as it is"
REMINDER = {"type": "user/message", "time": 0, "surfaceOp": "append",
            "data": {"role": "user", "id": "reminder-1",
                     "source": {"kind": "plugin", "plugin": "skills"},
                     "content": [{"type": "text",
                                  "text": "<system-reminder>skills</system-reminder>"}]}}


@pytest.fixture
def rita(reviewer: Any) -> Client:
    return reviewer_client("rita", "rita-password-1")


def conversation_of(html: str) -> str:
    return html.split('id="conversation"')[1].split("</section>")[0]


def test_the_intent_page_shows_what_the_person_asked_beside_the_agents_reading(
    rita: Client, agent: AgentClient, workspace: Path, project: Project
) -> None:
    Project.objects.filter(pk=project.pk).update(review_mode="required")
    session_id = agent.create_session(workspace)["id"]
    trace = Trace().start_turn(ASKED)
    trace.pending.append(REMINDER)
    trace.say("I will add the section.")
    assert agent.append(session_id, trace.flush()).status_code == 200
    begun = agent.post(f"/sessions/{session_id}/contracts", contract_body())
    assert begun.status_code == 202, begun.content
    html = rita.get(begun.json()["review"]["review_url"]).content.decode()
    asked = html.split('id="task-heading"')[1].split("</section>")[0]
    assert ASKED in asked
    assert "system-reminder" not in asked  # a plugin's text in the user's place is not a request
    intends = html.split('id="intent-heading"')[1].split("</section>")[0]
    assert "Keep the existing sections of README.md" in intends
    assert html.index('id="task-heading"') < html.index('id="intent-heading"')


def test_an_intent_without_a_request_in_the_log_says_so(
    rita: Client, agent: AgentClient, workspace: Path, project: Project
) -> None:
    Project.objects.filter(pk=project.pk).update(review_mode="required")
    session_id = agent.create_session(workspace)["id"]
    begun = agent.post(f"/sessions/{session_id}/contracts", contract_body())
    html = rita.get(begun.json()["review"]["review_url"]).content.decode()
    assert "holds no message from the user before this proposal" in html


def test_the_conversation_shows_messages_tool_calls_and_verdicts_in_order(
    rita: Client, agent: AgentClient, workspace: Path
) -> None:
    session_id = agent.create_session(workspace)["id"]
    trace = Trace().start_turn(ASKED)
    trace.pending.append(REMINDER)
    trace.tool("write_file", '{"path": "README.md", "text": "# Tool"}', text="wrote 6 bytes")
    trace.tool("run_tests", "{}", ok=False, text="1 failed")
    trace.say("The section is written.").end_turn()
    assert agent.append(session_id, trace.flush()).status_code == 200
    html = conversation_of(timeline(rita, session_id))
    order = [ASKED, "Context", "write_file", "&quot;path&quot;: &quot;README.md&quot;",
             "wrote 6 bytes", "run_tests", "1 failed", "The section is written."]
    positions = [html.index(text) for text in order]
    assert positions == sorted(positions)
    assert html.count("<details><summary>Arguments</summary>") == 2
    assert "<details><summary>Result (error)</summary>" in html  # run_tests failed
    assert 'href="#events"' in html  # the raw event table is one click away


def test_verifier_runs_and_verdicts_are_in_the_conversation(
    rita: Client, agent: AgentClient, workspace: Path
) -> None:
    session_id = certified_session(agent, workspace)
    html = conversation_of(timeline(rita, session_id))
    order = ["Contract activated", "Attempt 1 (manual)", "0 of 2 checks passed",
             "Attempt 2 (manual)", "2 of 2 checks passed", "Verdict: certified"]
    positions = [html.index(text) for text in order]
    assert positions == sorted(positions)
    assert "format v3" in html


def test_tool_output_is_escaped_and_capped(
    rita: Client, agent: AgentClient, workspace: Path
) -> None:
    session_id = agent.create_session(workspace)["id"]
    hostile = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    long_tail = "y" * (TEXT_CHARS + 1500)
    trace = Trace().start_turn(f"<b>{hostile}</b>")
    trace.tool("fetch", f'{{"url": "{hostile.replace(chr(34), "")}"}}', text=hostile + long_tail)
    assert agent.append(session_id, trace.flush()).status_code == 200
    html = conversation_of(timeline(rita, session_id))
    assert "<script>" not in html and "<img" not in html and "<b>" not in html
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html
    assert f"{len(hostile) + 1500:,}".replace(",", "") in html.replace(",", "")
    assert "more characters not shown" in html
    assert "y" * (TEXT_CHARS + 1) not in html


def test_events_sent_without_a_time_show_a_dash_not_1970(
    rita: Client, agent: AgentClient, workspace: Path
) -> None:
    session_id = agent.create_session(workspace)["id"]
    trace = Trace().start_turn(ASKED)
    trace.pending[-1]["time"] = 1_700_000_000_000
    assert agent.append(session_id, trace.flush()).status_code == 200
    html = timeline(rita, session_id)
    assert "1970" not in html
    times = re.findall(r'<td data-label="Time">(.*?)</td>', html, re.S)
    assert len(times) == 2 and "—" in times[0] and "2023-11-14 22:13:20" in times[1]


@pytest.mark.parametrize("steps", [5, 60])
def test_the_conversation_is_read_in_one_query(
    rita: Client, agent: AgentClient, workspace: Path, steps: int,
    django_assert_num_queries: Any
) -> None:
    session_id = agent.create_session(workspace)["id"]
    trace = Trace().start_turn(ASKED)
    for step in range(steps):
        trace.tool("read_file", f'{{"n": {step}}}')
    assert agent.append(session_id, trace.flush()).status_code == 200
    # session, user, the session, status (state ×2, pending and latest review ×3), membership,
    # one page of events, the conversation, the session's reviews, and the live part (its
    # version: next seq and runs' states; the runs), the reported outcomes (their events), and
    # the outcome panel (the session's outcome contract: none here)
    with django_assert_num_queries(16):
        html = timeline(rita, session_id)
    assert conversation_of(html).count("read_file") == steps
