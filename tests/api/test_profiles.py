"""Verifier profiles kept by operators: the admin (operators of the project only) and a file
under version control (`governor_profiles load|dump`), validated by rules §8."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command
from django.test import Client

from governor.models import Membership, Project
from verification.models import ProfileVersion, VerifierProfile

PROFILE = {"id": "unit-tests", "description": "Unit tests", "argv": ["pytest", "-q"],
           "timeout_ms": 60000, "sandbox_mode": "read-only", "required": True,
           "env": {"CI": "1"}, "limits": {"pids": 64}}


def load(tmp_path: Path, document: Any, name: str = "profiles.json") -> str:
    path = tmp_path / name
    text = yaml.safe_dump(document) if name.endswith(".yaml") else json.dumps(document)
    path.write_text(text)
    out = io.StringIO()
    call_command("governor_profiles", "load", str(path), "--project", "acme", stdout=out)
    return out.getvalue()


def test_load_is_idempotent_and_an_edit_keeps_the_old_receipt(
    project: Project, tmp_path: Path
) -> None:
    assert "1 changed" in load(tmp_path, {"profiles": [PROFILE]})
    assert "0 changed" in load(tmp_path, {"profiles": [PROFILE]})
    first = VerifierProfile.objects.get().receipt
    load(tmp_path, {"profiles": [{**PROFILE, "argv": ["pytest", "-x"]}]}, "p.yaml")
    profile = VerifierProfile.objects.get()
    assert profile.receipt != first
    assert set(ProfileVersion.objects.values_list("receipt", flat=True)) == {first,
                                                                            profile.receipt}


def test_dump_round_trips(project: Project, tmp_path: Path) -> None:
    load(tmp_path, {"profiles": [PROFILE]})
    out = io.StringIO()
    call_command("governor_profiles", "dump", "--project", "acme", stdout=out)
    dumped = json.loads(out.getvalue())
    assert "0 changed" in load(tmp_path, dumped)
    assert dumped["profiles"][0]["argv"] == ["pytest", "-q"]


def test_a_bad_profile_file_loads_nothing_and_names_the_field(
    project: Project, tmp_path: Path
) -> None:
    bad = {**PROFILE, "id": "b", "env": {"API_TOKEN": "x"}}
    with pytest.raises(CommandError, match="profiles/1: env/API_TOKEN"):
        load(tmp_path, {"profiles": [PROFILE, bad]})
    assert not VerifierProfile.objects.exists()


def admin_client(project: Project, role: str) -> Client:
    user = get_user_model().objects.create_user(f"{role}-user", password="pw-123456789",
                                                is_staff=True)
    Membership.objects.create(user=user, project=project, role=role)
    client = Client()
    client.force_login(user)
    return client


def form(**overrides: Any) -> dict[str, Any]:
    return {"profile_id": "lint", "description": "Lint", "argv": '["ruff", "check"]',
            "timeout_ms": "30000", "sandbox_mode": "read-only", "required": "on", "env": "{}",
            "limits": "{}", "rootfs": "", "versions-TOTAL_FORMS": "0",
            "versions-INITIAL_FORMS": "0", **overrides}


def test_an_operator_adds_a_profile_in_the_admin(project: Project) -> None:
    client = admin_client(project, "operator")
    response = client.post("/admin/verification/verifierprofile/add/",
                           form(project=project.pk))
    assert response.status_code == 302, response.content.decode()[:2000]
    profile = VerifierProfile.objects.get()
    assert profile.receipt.startswith("sha256:") and profile.argv == ["ruff", "check"]


def test_the_admin_refuses_a_secret_env_name(project: Project) -> None:
    client = admin_client(project, "operator")
    response = client.post("/admin/verification/verifierprofile/add/",
                           form(project=project.pk, env='{"DB_PASSWORD": "x"}'))
    assert response.status_code == 200
    assert "env/DB_PASSWORD" in response.content.decode()
    assert not VerifierProfile.objects.exists()


def test_a_reviewer_who_is_not_an_operator_cannot_manage_profiles(project: Project) -> None:
    client = admin_client(project, "reviewer")
    assert client.get("/admin/verification/verifierprofile/").status_code == 403
