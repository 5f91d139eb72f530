"""rules §18.1: held-out suites — loaded from a directory or an archive, versioned with a
receipt per version, their bytes kept in the blob store under the project's held-out prefix
(`governor.lib.blobstore.heldout_blob_name`). They are read back (governor/selectors/heldout.py)
only for a run and for the project's reviewers and operators."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from django.core.files.base import ContentFile
from django.db import transaction

from governor.domain.heldout import parse_suite, version_document, version_receipt
from governor.domain.tree import blob_id
from governor.lib.blobstore import heldout_blob_name, store, store_outage
from governor.lib.heldout import directory_entries
from governor.models import Project
from verification.models import HeldoutSuite, HeldoutSuiteVersion


def suite_load(*, project: Project, name: str, entries: Iterable[tuple[str, str, bytes]]
               ) -> tuple[HeldoutSuiteVersion, bool]:
    """Load a version of the suite `name` from a directory's entries (path, mode, bytes):
    (version, created). Refused as a whole (SuiteError naming every file, line and field) before
    anything is stored; the bytes reach the store before any row names them; a version the
    suite already had is made current again, not stored twice."""
    suite = parse_suite(name, entries)
    document = version_document(suite)
    receipt = version_receipt(document)
    blobs = [*(item.data for item in suite.files),
             *([suite.cases_data] if suite.cases_data is not None else [])]
    storage = store()
    for data in blobs:
        target = heldout_blob_name(project, blob_id(data))
        try:
            if not storage.exists(target):
                storage.save(target, ContentFile(data))
        except Exception as exc:  # any backend failure: the store is unreachable or full
            raise store_outage(f"write of a held-out file of {name}", exc) from None
    with transaction.atomic():
        row, _ = HeldoutSuite.objects.select_for_update().get_or_create(project=project,
                                                                        name=name)
        version, created = HeldoutSuiteVersion.objects.get_or_create(
            suite=row, receipt=receipt, defaults={"document": document})
        if row.version_id != version.pk:
            row.version = version
            row.save(update_fields=["version", "updated_at"])
    return version, created


def suite_directory_load(*, project: Project, name: str, directory: str | Path
                         ) -> tuple[HeldoutSuiteVersion, bool]:
    return suite_load(project=project, name=name, entries=directory_entries(directory))
