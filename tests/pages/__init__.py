"""Helpers for the reviewer-page specifications: proposals made the way an agent makes them
(through the API), and forms submitted the way a browser submits them (the token and the
receipt come from the page that was shown)."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path
from typing import Any

from django.http import HttpRequest
from django.test import Client

from reviews.models import Review
from tests.conftest import AgentClient
from tests.html_forms import forms_on

INTENT = {
    "constraints": ["Keep the existing sections of README.md"],
    "assumptions": ["README.md may not exist yet"],
    "non_goals": ["No changes to CI"],
    "ambiguities": ["Which package manager the Install section should name"],
}


def contract_body(*, checks: int = 2, claims: int = 1, **extra: Any) -> dict[str, Any]:
    """A ready-to-begin contract with an intent: `claims` critical claims sharing `checks`
    file checks (the first `file_exists`, the rest `file_contains`)."""
    check_list: list[dict[str, Any]] = [{"id": "readme-exists", "kind": "file_exists",
                                         "path": "README.md"}]
    check_list += [{"id": f"readme-has-{n}", "kind": "file_contains", "path": "README.md",
                    "text": f"## Section {n}"} for n in range(1, checks)]
    check_ids = [check["id"] for check in check_list]
    claim_list = [{"id": f"claim-{n}", "statement": f"README.md satisfies requirement {n}",
                   "importance": "critical", "verification": "deterministic",
                   "check_ids": check_ids if n == 0 else [check_ids[n % len(check_ids)]]}
                  for n in range(claims)]
    return {"objective": "Write README.md with an Install section", "claims": claim_list,
            "checks": check_list, "intent": INTENT, **extra}


def propose(agent: AgentClient, workspace: Path, **body: Any) -> tuple[str, Review]:
    """A new session whose begin waits for review; the session id and its intent review."""
    session_id = agent.create_session(workspace)["id"]
    response = agent.post(f"/sessions/{session_id}/contracts", contract_body(**body))
    assert response.status_code == 202, response.content
    return session_id, Review.objects.get(pk=response.json()["review"]["id"])


def reviewer_client(username: str, password: str) -> Client:
    client = Client(enforce_csrf_checks=True)
    # django-axes throttles logins per address, so authenticate() needs the request.
    assert client.login(request=HttpRequest(), username=username, password=password)
    return client


def decision_form(html: str, button: str) -> dict[str, Any]:
    """The form on the page whose submit button reads exactly `button`."""
    matches = [form for form in forms_on(html) if button in form["buttons"]]
    assert len(matches) == 1, f"expected one form with a {button!r} button"
    return matches[0]


def reject(client: Client, url: str, reason: str, *, html: str | None = None,
           **headers: str) -> Any:
    """Press Reject with `reason`, then Confirm rejection on the page that asks."""
    asked = press(client, url, "Reject", feedback=reason, html=html, **headers)
    assert asked.status_code == 200, asked.status_code
    return press(client, url, "Confirm rejection", html=asked.content.decode(), **headers)


def press(client: Client, url: str, button: str, *, feedback: str | None = None,
          html: str | None = None, **headers: str) -> Any:
    """Load `url` (unless the page's `html` is given), fill in the form of `button` and post it
    exactly as the browser would."""
    if html is None:
        page = client.get(url)
        assert page.status_code == 200, page.status_code
        html = page.content.decode()
    form = decision_form(html, button)
    fields = dict(form["fields"])
    name, value = form["submits"][form["buttons"].index(button)]
    if name:
        fields[name] = value  # a browser sends the pressed button's name and value
    if feedback is not None:
        fields["feedback"] = feedback
    return client.post(form["action"], fields, headers=headers or None)


def diff_text(html: str) -> str:
    """The unified diffs a page shows (`sessions/partials/changes.html`), read back as text:
    one line per diff row, `+`, `-` or a space, then the line's text without its markup."""
    rows = re.findall(r'<tr class="line-(added|removed|context)"[^>]*>.*?<td class="code">(.*?)'
                      r"</td>", html, flags=re.S)
    marks = {"added": "+", "removed": "-", "context": " "}
    return "".join(f"{marks[kind]}{unescape(re.sub(r'<[^>]+>', '', text))}\n"
                   for kind, text in rows)
