"""rules §11.3: a worker's blob cache is bounded by GOVERNOR_BLOB_CACHE_BYTES — the least
recently used blobs go first, never one a materialised tree links."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pytest

from governor.domain.tree import ManifestEntry, blob_id
from governor.lib.materialise import blob_cache_trim, materialised
from governor.models import Project
from governor.services.blobs import blobs_keep

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("private_store")]
CONTENTS = {name: name.encode() * 1000 for name in "ABCD"}  # 1,000 bytes each


@pytest.fixture
def stored(project: Project) -> Project:
    blobs_keep(project, [(blob_id(data), data) for data in CONTENTS.values()])
    return project


def tree(*names: str) -> list[ManifestEntry]:
    return [ManifestEntry(f"{name}.txt", "100644", blob_id(CONTENTS[name])) for name in names]


def cached(settings: Any, project: Project) -> set[str]:
    directory = Path(settings.VAR_DIR) / "blob-cache" / str(project.pk)
    by_blob = {blob_id(data): name for name, data in CONTENTS.items()}
    return {by_blob[path.name] for path in directory.iterdir()}


def use(project: Project, *names: str, writable: bool = False) -> None:
    with materialised(project.pk, tree(*names), writable=writable) as root:
        assert sorted(os.listdir(root)) == [f"{name}.txt" for name in names]
    time.sleep(0.05)  # the next use is later on the filesystem's (coarse) clock


def test_the_least_recently_used_blobs_are_evicted_past_the_cache_size(
        stored: Project, settings: Any) -> None:
    settings.GOVERNOR_BLOB_CACHE_BYTES = 3000
    for name in "ABC":
        use(stored, name)
    assert cached(settings, stored) == {"A", "B", "C"}  # 3,000 bytes: within the size
    use(stored, "A")  # A is now used more recently than B and C
    use(stored, "D")
    assert cached(settings, stored) == {"A", "C", "D"}
    use(stored, "C", writable=True)  # a private copy is a use too
    use(stored, "B")
    assert cached(settings, stored) == {"B", "C", "D"}


def test_a_blob_a_materialised_tree_links_is_never_evicted(
        stored: Project, settings: Any) -> None:
    settings.GOVERNOR_BLOB_CACHE_BYTES = 10_000
    use(stored, "C")
    settings.GOVERNOR_BLOB_CACHE_BYTES = 0
    with materialised(stored.pk, tree("A", "B")) as root:
        # Trimmed as it was made: C went, the two blobs the tree links stay.
        assert cached(settings, stored) == {"A", "B"}
        assert blob_cache_trim() == {"evicted": 0, "bytes": 2000}
        assert Path(root, "A.txt").read_bytes() == CONTENTS["A"]
    assert blob_cache_trim() == {"evicted": 2, "bytes": 0}  # unlinked now: evictable


def test_an_evicted_blob_is_fetched_from_the_store_again(stored: Project,
                                                         settings: Any) -> None:
    settings.GOVERNOR_BLOB_CACHE_BYTES = 0
    use(stored, "A")
    assert blob_cache_trim()["bytes"] == 0
    with materialised(stored.pk, tree("A")) as root:
        assert Path(root, "A.txt").read_bytes() == CONTENTS["A"]


def test_evicting_never_touches_a_tree_being_run(stored: Project, settings: Any) -> None:
    """Even a cache name removed under a live tree (another worker process evicting between
    the link-count check and the unlink) leaves the tree's file whole: a hard link."""
    settings.GOVERNOR_BLOB_CACHE_BYTES = 10_000
    with materialised(stored.pk, tree("A")) as root:
        for path in (Path(settings.VAR_DIR) / "blob-cache").rglob("*"):
            if path.is_file():
                path.unlink()
        assert Path(root, "A.txt").read_bytes() == CONTENTS["A"]
