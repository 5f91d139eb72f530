"""Login throttling (django-axes) on both login pages: a password guesser is locked out per
username and address, sees a page saying so, and an admin can unlock the pair."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tests.html_forms import forms_on

LIMIT = 5  # settings.AXES_FAILURE_LIMIT


@pytest.fixture
def root(db: Any) -> Any:
    return get_user_model().objects.create_superuser("root", "root@example.com",
                                                     "root-password-1")


def browser(address: str = "203.0.113.7") -> Client:
    return Client(enforce_csrf_checks=True, REMOTE_ADDR=address)


def log_in(client: Client, page: str, username: str, password: str) -> Any:
    """Submit the login form of `page` as a browser would."""
    shown = client.get(page)
    [form] = [form for form in forms_on(shown.content.decode()) if "password" in form["fields"]]
    fields = {**form["fields"], "username": username, "password": password}
    return client.post(form["action"] or page, fields)


def signed_in(client: Client) -> bool:
    return bool(client.session.get("_auth_user_id"))


@pytest.mark.parametrize("page", ["/accounts/login/", "/admin/login/"])
def test_after_five_wrong_passwords_even_the_right_one_is_refused_with_the_lockout_page(
    page: str, reviewer: Any, root: Any
) -> None:
    username, password = ("rita", "rita-password-1") if page == "/accounts/login/" else (
        "root", "root-password-1")
    guesser = browser()
    for attempt in range(100):
        answer = log_in(guesser, page, username, f"guess-{attempt}")
        if attempt < LIMIT - 1:
            assert answer.status_code == 200, attempt  # the form again, with its error
        else:
            assert answer.status_code == 429, attempt
    refused = log_in(guesser, page, username, password)
    assert refused.status_code == 429
    html = refused.content.decode()
    assert "Too many failed logins" in html and username in html
    assert "after 5 wrong passwords" in html and "15 minutes" in html
    assert not signed_in(guesser)


def test_the_lockout_holds_one_username_at_one_address_only(reviewer: Any, root: Any) -> None:
    guesser = browser("203.0.113.7")
    for attempt in range(LIMIT):
        log_in(guesser, "/accounts/login/", "rita", f"guess-{attempt}")
    assert log_in(guesser, "/accounts/login/", "rita", "rita-password-1").status_code == 429

    elsewhere = browser("198.51.100.20")  # rita herself, from her own address
    assert log_in(elsewhere, "/accounts/login/", "rita", "rita-password-1").status_code == 302
    assert signed_in(elsewhere)
    colleague = browser("203.0.113.7")  # another user behind the guesser's address
    assert log_in(colleague, "/admin/login/", "root", "root-password-1").status_code == 302
    assert signed_in(colleague)


def test_an_admin_unlocks_a_locked_out_user(reviewer: Any, root: Any) -> None:
    guesser = browser()
    for attempt in range(LIMIT):
        log_in(guesser, "/accounts/login/", "rita", f"guess-{attempt}")
    assert log_in(guesser, "/accounts/login/", "rita", "rita-password-1").status_code == 429

    admin = browser("198.51.100.1")
    assert log_in(admin, "/admin/login/", "root", "root-password-1").status_code == 302
    listing = admin.get("/admin/axes/accessattempt/")
    assert listing.status_code == 200 and "rita" in listing.content.decode()
    from axes.models import AccessAttempt

    [attempt] = AccessAttempt.objects.filter(username="rita")
    csrf = admin.cookies["csrftoken"].value
    confirm = admin.post("/admin/axes/accessattempt/", {
        "csrfmiddlewaretoken": csrf, "action": "delete_selected",
        "_selected_action": [attempt.pk]})
    assert confirm.status_code == 200
    [form] = [form for form in forms_on(confirm.content.decode())
              if form["fields"].get("post") == "yes"]
    assert admin.post(form["action"] or "/admin/axes/accessattempt/",
                      form["fields"]).status_code == 302
    assert not AccessAttempt.objects.filter(username="rita").exists()

    assert log_in(guesser, "/accounts/login/", "rita", "rita-password-1").status_code == 302
    assert signed_in(guesser)
