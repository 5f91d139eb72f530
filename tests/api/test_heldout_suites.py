"""rules §18.1: held-out suites are loaded from a directory (or an archive in the admin),
versioned with a receipt per version, kept in the blob store on both backends under a prefix
no agent route reaches, and named by profiles only when the project has them."""

from __future__ import annotations

import io
import json
import os
import tarfile
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.files.storage import storages
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import Client

from governor.domain.heldout import SuiteError
from governor.domain.profiles import ProfileError, validate_profile
from governor.lib.blobstore import blob_name, heldout_blob_name
from governor.lib.heldout import archive_entries
from governor.models import Blob, Project
from governor.selectors.heldout import suite_current, suite_version_cases, suite_version_files
from governor.services.heldout import suite_directory_load
from governor.services.profiles import profile_store
from tests.api.test_profiles import admin_client
from tests.api.test_profiles import form as profile_form
from tests.conftest import filesystem_store
from tests.s3_server import s3_server  # noqa: F401 - the fixture
from verification.models import HeldoutSuite, HeldoutSuiteVersion, VerifierProfile

pytestmark = pytest.mark.django_db

CASES = [{"id": "add-1", "input": [1, 2], "expected": 3, "compare": "exact"},
         {"id": "add-2", "input": [2, 2], "expected": 4, "compare": "exact"}]


def write_suite(root: Path, cases: list[dict[str, Any]] | None = CASES,
                test: str = "def test_hidden():\n    assert True\n") -> Path:
    (root / "tests").mkdir(parents=True, exist_ok=True)
    (root / "tests" / "test_hidden.py").write_text(test)
    (root / "run.sh").write_text("#!/bin/sh\n")
    (root / "run.sh").chmod(0o755)
    if cases is not None:
        (root / "cases.jsonl").write_text("".join(json.dumps(case) + "\n" for case in cases))
    return root


@pytest.fixture(params=["filesystem", "s3"])
def store(request: Any, settings: Any, tmp_path: Path) -> str:
    settings.VAR_DIR = tmp_path / "var"
    if request.param == "s3":
        server = request.getfixturevalue("s3_server")
        storage = server.storage(server.bucket())
    else:
        storage = filesystem_store(tmp_path / "blobs")
    settings.STORAGES = {**settings.STORAGES, "governor_blobs": storage}
    return str(request.param)


def test_rule_18_1_a_loaded_suite_is_kept_in_the_blob_store_and_read_back_whole(
        store: str, project: Project, tmp_path: Path) -> None:
    version, created = suite_directory_load(project=project, name="golden",
                                            directory=write_suite(tmp_path / "suite"))
    assert created and version.receipt.startswith("sha256:")
    assert version.file_count == 2 and version.case_count == 2
    files = suite_version_files(version)
    assert [(path, mode) for path, mode, _ in files] == [("run.sh", "100755"),
                                                         ("tests/test_hidden.py", "100644")]
    assert [case.expected for case in suite_version_cases(version)] == [3, 4]
    storage = storages["governor_blobs"]
    for item in version.document["files"]:
        assert storage.exists(heldout_blob_name(project, item["blob"]))
        # Never where the agent's blob routes look, and no Blob row garbage collection walks.
        assert not storage.exists(blob_name(project, item["blob"]))
    assert not Blob.objects.exists()


def test_rule_18_1_each_version_has_its_receipt_and_loading_again_changes_nothing(
        store: str, project: Project, tmp_path: Path) -> None:
    root = write_suite(tmp_path / "suite")
    first, _ = suite_directory_load(project=project, name="golden", directory=root)
    again, created = suite_directory_load(project=project, name="golden", directory=root)
    assert not created and again.pk == first.pk
    write_suite(root, cases=[*CASES, {"id": "add-3", "input": [3, 3], "expected": 6,
                                      "compare": "exact"}])
    second, created = suite_directory_load(project=project, name="golden", directory=root)
    assert created and second.receipt != first.receipt
    suite = HeldoutSuite.objects.get(project=project, name="golden")
    assert suite.version == second and suite.versions.count() == 2
    assert [case.id for case in suite_version_cases(first)] == ["add-1", "add-2"]


def test_rule_18_1_a_refused_suite_stores_nothing_and_names_the_line_and_field(
        store: str, project: Project, tmp_path: Path) -> None:
    root = write_suite(tmp_path / "suite", cases=[*CASES, {**CASES[0], "tolerance": -1,
                                                           "compare": "number"}])
    with pytest.raises(SuiteError) as caught:
        suite_directory_load(project=project, name="golden", directory=root)
    assert caught.value.errors == [{"path": "cases.jsonl:3/tolerance",
                                    "message": "must not be negative (got -1)"}]
    assert not HeldoutSuite.objects.exists() and not HeldoutSuiteVersion.objects.exists()
    assert not storages["governor_blobs"].exists(f"heldout/{project.pk}")


def test_rule_18_1_a_link_in_the_directory_is_refused_naming_it(
        private_store: None, project: Project, tmp_path: Path) -> None:
    root = write_suite(tmp_path / "suite")
    os.symlink("/etc/passwd", root / "tests" / "passwd")
    with pytest.raises(SuiteError) as caught:
        suite_directory_load(project=project, name="golden", directory=root)
    assert caught.value.errors[0]["path"] == "tests/passwd"
    assert not HeldoutSuite.objects.exists()


def test_rule_18_1_the_command_loads_dumps_and_lists_and_a_dump_loads_back_the_same(
        private_store: None, project: Project, tmp_path: Path) -> None:
    root = write_suite(tmp_path / "suite")
    out = io.StringIO()
    call_command("governor_heldout", "load", str(root), "--project", "acme", "--name",
                 "golden", stdout=out)
    receipt = suite_current(project, "golden").receipt  # type: ignore[union-attr]
    assert f"golden {receipt}: 2 file(s), 2 case(s), a new version" in out.getvalue()
    call_command("governor_heldout", "dump", str(tmp_path / "copy"), "--project", "acme",
                 "--name", "golden", stdout=io.StringIO())
    assert (tmp_path / "copy" / "cases.jsonl").read_bytes() == (root / "cases.jsonl").read_bytes()
    assert os.access(tmp_path / "copy" / "run.sh", os.X_OK)
    out = io.StringIO()
    call_command("governor_heldout", "load", str(tmp_path / "copy"), "--project", "acme",
                 "--name", "golden", stdout=out)
    assert "unchanged" in out.getvalue()
    out = io.StringIO()
    call_command("governor_heldout", "list", "--project", "acme", stdout=out)
    assert out.getvalue() == f"golden {receipt} 2 file(s) 2 case(s)\n"


def test_rule_18_1_the_command_refuses_a_bad_case_file_naming_line_and_field(
        private_store: None, project: Project, tmp_path: Path) -> None:
    root = write_suite(tmp_path / "suite")
    with open(root / "cases.jsonl", "a") as handle:
        handle.write('{"id": "x", "input": 1, "expected": 1, "compare": "near"}\n')
    with pytest.raises(CommandError, match=r"cases.jsonl:3/compare: must be one of exact"):
        call_command("governor_heldout", "load", str(root), "--project", "acme", "--name",
                     "golden")
    assert not HeldoutSuite.objects.exists()


def test_rule_18_1_an_archive_of_the_directory_reads_as_the_directory(tmp_path: Path) -> None:
    root = write_suite(tmp_path / "suite")
    for arcname in (".", "suite"):
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
            archive.add(root, arcname=arcname)
        entries = archive_entries("suite.tgz", buffer.getvalue())
        assert sorted((path, mode) for path, mode, _ in entries) == [
            ("cases.jsonl", "100644"), ("run.sh", "100755"), ("tests/test_hidden.py", "100644")]
    with pytest.raises(SuiteError, match="not a readable"):
        archive_entries("suite.tgz", b"not an archive")


PROFILE = {"id": "hidden-tests", "description": "Held-out tests", "argv": ["pytest", "-q"],
           "heldout": "golden"}


def test_rule_18_2_a_profile_naming_an_unknown_suite_is_refused_at_load_naming_it(
        private_store: None, project: Project, tmp_path: Path) -> None:
    with pytest.raises(ProfileError) as caught:
        profile_store(model=VerifierProfile, project=project,
                      validated=validate_profile({**PROFILE, "oracle": "answers"}))
    assert [error["path"] for error in caught.value.errors] == ["heldout", "oracle"]
    assert "no held-out suite 'golden' in project acme" in str(caught.value)
    assert not VerifierProfile.objects.exists()
    profiles = tmp_path / "profiles.json"
    profiles.write_text(json.dumps({"profiles": [PROFILE]}))
    with pytest.raises(CommandError, match="profiles/0: heldout: no held-out suite 'golden'"):
        call_command("governor_profiles", "load", str(profiles), "--project", "acme")
    suite_directory_load(project=project, name="golden", directory=write_suite(tmp_path / "s"))
    call_command("governor_profiles", "load", str(profiles), "--project", "acme",
                 stdout=io.StringIO())
    profile = VerifierProfile.objects.get()
    assert profile.heldout == "golden" and profile.definition()["heldout"] == "golden"
    assert profile.as_input()["heldout"] == "golden"


def test_rule_18_2_held_out_fields_enter_the_receipt_only_when_set() -> None:
    from governor.domain.profiles import profile_definition

    plain = profile_definition(validate_profile({k: v for k, v in PROFILE.items()
                                                 if k != "heldout"}))
    assert "heldout" not in plain and "oracle" not in plain
    with pytest.raises(ProfileError) as caught:
        validate_profile({**PROFILE, "heldout": "Not A Name", "oracle": "x", "report": "junit"})
    assert [error["path"] for error in caught.value.errors] == ["heldout", "oracle"]


# --- the admin ----------------------------------------------------------------------------------


def archive_of(root: Path) -> SimpleUploadedFile:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        archive.add(root, arcname=".")
    return SimpleUploadedFile("suite.tar.gz", buffer.getvalue())


NO_INLINE_FORMS = {"versions-TOTAL_FORMS": "0", "versions-INITIAL_FORMS": "0"}


@pytest.fixture
def operator(db: Any) -> Client:
    root = get_user_model().objects.create_superuser("root", "root@example.com", "root-pass-1")
    client = Client()
    client.force_login(root)
    return client


def test_rule_18_1_the_admin_uploads_an_archive_and_lists_files_cases_and_versions(
        private_store: None, project: Project, operator: Client, tmp_path: Path) -> None:
    root = write_suite(tmp_path / "suite")
    answer = operator.post("/admin/verification/heldoutsuite/add/",
                           {"project": project.pk, "name": "golden",
                            "archive": archive_of(root), **NO_INLINE_FORMS})
    assert answer.status_code == 302, answer.content.decode()[-2000:]
    suite = HeldoutSuite.objects.get(project=project, name="golden")
    page = operator.get(f"/admin/verification/heldoutsuite/{suite.pk}/change/").content.decode()
    assert suite.version is not None and suite.version.receipt in page
    assert "tests/test_hidden.py" in page and "add-2" in page and "[2,2]" in page
    write_suite(root, cases=[CASES[0]])
    answer = operator.post(f"/admin/verification/heldoutsuite/{suite.pk}/change/",
                           {"archive": archive_of(root), **NO_INLINE_FORMS})
    assert answer.status_code == 302, answer.content.decode()[-2000:]
    suite.refresh_from_db()
    assert suite.versions.count() == 2 and suite.version.case_count == 1  # type: ignore[union-attr]
    listing = operator.get("/admin/verification/heldoutsuite/").content.decode()
    assert "golden" in listing


def test_rule_18_1_the_admin_refuses_a_bad_archive_naming_the_line_and_stores_nothing(
        private_store: None, project: Project, operator: Client, tmp_path: Path) -> None:
    root = write_suite(tmp_path / "suite", cases=[CASES[0], CASES[0]])
    answer = operator.post("/admin/verification/heldoutsuite/add/",
                           {"project": project.pk, "name": "golden",
                            "archive": archive_of(root), **NO_INLINE_FORMS})
    assert answer.status_code == 200
    assert "cases.jsonl:2/id: repeats case id" in answer.content.decode().replace("&#x27;", "'")
    assert not HeldoutSuite.objects.exists()


def test_rule_18_2_the_admin_refuses_a_profile_naming_an_unknown_suite_and_takes_a_known_one(
        private_store: None, project: Project, tmp_path: Path) -> None:
    client = admin_client(project, "operator")
    response = client.post("/admin/verification/verifierprofile/add/",
                           profile_form(project=project.pk, heldout="golden"))
    assert response.status_code == 200
    assert "heldout: no held-out suite &#x27;golden&#x27; in project acme" in (
        response.content.decode())
    assert not VerifierProfile.objects.exists()
    suite_directory_load(project=project, name="golden", directory=write_suite(tmp_path / "s"))
    response = client.post("/admin/verification/verifierprofile/add/",
                           profile_form(project=project.pk, heldout="golden"))
    assert response.status_code == 302, response.content.decode()[:2000]
    assert VerifierProfile.objects.get().definition()["heldout"] == "golden"


def test_rule_18_1_another_projects_operator_neither_sees_nor_reads_the_suite(
        private_store: None, project: Project, tmp_path: Path) -> None:
    version, _ = suite_directory_load(project=project, name="golden",
                                      directory=write_suite(tmp_path / "s"))
    other = Project.objects.create(slug="other", name="Other", review_mode="off")
    client = admin_client(other, "operator")
    listing = client.get("/admin/verification/heldoutsuite/").content.decode()
    assert "golden" not in listing
    answer = client.get(f"/admin/verification/heldoutsuite/{version.suite_id}/change/")
    assert answer.status_code in (302, 404)
    assert "add-2" not in answer.content.decode()
    reviewer = admin_client(project, "reviewer")
    assert reviewer.get("/admin/verification/heldoutsuite/").status_code == 403
