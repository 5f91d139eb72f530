"""docs/operations.md, "The profile file": the example loads as written with
`governor_profiles load`, and every field it sets is what the profile holds afterwards."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command

from governor.domain.profiles import FIELDS, LIMITS
from governor.models import Project
from governor.services.heldout import suite_directory_load
from tests.docs.markdown import PAGES, ROOT, fenced_blocks, operator_environment_moved
from verification.models import VerifierProfile

HELDOUT_EXAMPLE = ROOT / "docs" / "examples" / "heldout" / "suite"


def documented_example(environment: Path | None = None) -> dict:
    """The example; with `environment`, its operator environment directory moved there (it
    must exist to load, rules §17.8)."""
    blocks = [block for block in fenced_blocks(ROOT / "docs" / "operations.md")
              if block.heading == "The profile file" and block.language == "json"]
    assert len(blocks) == 1, "one JSON example under 'The profile file'"
    text = blocks[0].text
    return json.loads(operator_environment_moved(text, environment) if environment else text)


@pytest.fixture
def environment(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The documented operator environment directory, made outside every workspace root."""
    return tmp_path_factory.mktemp("py311")


def test_the_documented_example_sets_every_field_and_every_limit() -> None:
    full = documented_example()["profiles"][0]
    # `heldout` and `oracle` name a suite the project must have loaded: they are shown, loaded
    # as written, under "Held-out suites" (tests/docs/test_careful_operator.py).
    assert set(full) == FIELDS - {"heldout", "oracle"}
    assert set(full["limits"]) == set(LIMITS)


def test_the_documented_profile_file_loads_as_written(project: Project, tmp_path: Path,
                                                      environment: Path) -> None:
    example = documented_example(environment)
    path = tmp_path / "profiles.json"
    path.write_text(json.dumps(example))
    out = io.StringIO()
    call_command("governor_profiles", "load", str(path), "--project", project.slug, stdout=out)
    assert "2 profile(s)" in out.getvalue() and "2 changed" in out.getvalue()

    stored = {p.profile_id: p.as_input() for p in VerifierProfile.objects.filter(project=project)}
    full, minimal = example["profiles"]
    assert stored[full["id"]] == full
    assert {name: stored[minimal["id"]][name] for name in minimal} == minimal


def test_the_documented_example_dumps_back_to_itself(project: Project, tmp_path: Path,
                                                     environment: Path) -> None:
    path = tmp_path / "profiles.yaml"
    path.write_text(json.dumps(documented_example(environment)))  # JSON is YAML too
    call_command("governor_profiles", "load", str(path), "--project", project.slug,
                 stdout=io.StringIO())
    dumped = io.StringIO()
    call_command("governor_profiles", "dump", "--project", project.slug, stdout=dumped)
    again = tmp_path / "again.json"
    again.write_text(dumped.getvalue())
    out = io.StringIO()
    call_command("governor_profiles", "load", str(again), "--project", project.slug, stdout=out)
    assert "0 changed" in out.getvalue()


def profile_files_in_the_docs() -> list[tuple[str, dict]]:
    """Every JSON block of the docs that is a profile file (`{"profiles": [...]}`)."""
    files = []
    for page in PAGES:
        for block in fenced_blocks(page):
            if block.language == "json" and '"profiles"' in block.text:
                document = json.loads(block.text)  # a profile file in the docs is whole JSON
                if set(document) == {"profiles"}:
                    files.append((block.where(), document))
    return files


@pytest.mark.parametrize(("where", "document"), profile_files_in_the_docs(),
                         ids=[where for where, _ in profile_files_in_the_docs()])
def test_every_profile_file_in_the_docs_loads(where: str, document: dict, project: Project,
                                              tmp_path: Path, environment: Path,
                                              private_store: None) -> None:
    path = tmp_path / "profiles.json"
    path.write_text(operator_environment_moved(json.dumps(document), environment))
    # A profile naming a held-out suite loads once the project has it (rules §18.2): the
    # worked example's suite stands in for each suite the file names.
    for name in {profile.get(field) for profile in document["profiles"]
                 for field in ("heldout", "oracle")} - {None}:
        suite_directory_load(project=project, name=name, directory=HELDOUT_EXAMPLE)
    out = io.StringIO()
    call_command("governor_profiles", "load", str(path), "--project", project.slug, stdout=out)
    assert f"{len(document['profiles'])} changed" in out.getvalue(), where
