"""B6. Review pages (docs/benchmarks.md).

Server time and SQL query count of the reviewer pages as their content grows: the evidence page
of one proposal with 10 and with 100 claims and checks, and the inbox with 10 and with 1,000
pending reviews. In a fresh interpreter on a throwaway database (SQLite, and PostgreSQL when one
is available, as B2 and B3 choose it), Django's test `Client` — logged in as the page's reviewer —
GETs each page in-process: middleware, session and user lookup, the view, its SQL and the template
all run; no network. Queries are counted with `CaptureQueriesContext`. Proposals are made through
the services the API calls (`session_create`, `contract_begin`, `review_decide`), one session per
pending review. The four pages take turns request by request, so drift hits them alike.

Issue 28 adds the delivered change: the delivery page (`/reviews/<id>/` of a delivery review)
and the session's changes page (`/sessions/<id>/changes`, every file diffed) of a change of 10
and of 1,000 files — 10 MB of text at the larger size, each file's lines all rewritten — made
by a path session whose contract (review off, delivery review required) starts on one tree and
whose passing attempt judges the other.

Goal (the gate): the query count of each page is the same at both sizes, one count at each — a
ratio of 1 measured in the same run, whatever the machine — and, at the larger size, the
delivery page's median is at most twice the evidence page's (the changes page is reported
beside it). A page diffs at most 5,000 lines in all; the file list names every file. The
design's other goal, median ≤ 50 ms at the larger size, is a time on the machine at hand: a
slower machine of this kind misses it while the query counts hold, so it is reported beside the
medians as context (met or missed), not gated.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from bench.common import (
    database_env,
    database_labels,
    database_version,
    django_setup,
    isolated,
    markdown_table,
    median,
    p95,
    postgres_url,
    progress,
)

NAME = "B6"
REQUESTS = 30
WARMUP = 3
PAGES = {"evidence": (10, 100), "inbox": (10, 1000), "delivery": (10, 1000),
         "changes": (10, 1000)}
CHANGE_BYTES = 10 * 1024 * 1024  # the larger delivered change, in all
DELIVERY_OVER_EVIDENCE = 2.0  # the delivery page's median at most this × the evidence page's
FILE_ROW = '<td class="mono path"><a href="'  # a row of the file list, which names every file
CONTEXT_MEDIAN_MS = 50.0  # the design's median at the larger size: reported, not gated
INTENT = {"constraints": ["Keep the existing sections of README.md"],
          "assumptions": ["README.md may not exist yet"],
          "non_goals": ["No changes to CI"],
          "ambiguities": ["Which package manager the Install section should name"]}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--b6-requests", type=int, default=REQUESTS, metavar="N",
                        help=f"B6: timed requests per page and size (default {REQUESTS})")
    parser.add_argument("--b6-inbox", type=int, default=PAGES["inbox"][1], metavar="N",
                        help="B6: pending reviews in the larger inbox (default "
                             f"{PAGES['inbox'][1]:,})")
    parser.add_argument("--b6-files", type=int, default=PAGES["delivery"][1], metavar="N",
                        help="B6: changed files of the larger delivered change (default "
                             f"{PAGES['delivery'][1]:,})")


def run(args: argparse.Namespace) -> dict[str, Any]:
    files = getattr(args, "b6_files", PAGES["delivery"][1])
    pages = {**PAGES, "inbox": (PAGES["inbox"][0], getattr(args, "b6_inbox", PAGES["inbox"][1])),
             "delivery": (PAGES["delivery"][0], files), "changes": (PAGES["changes"][0], files)}
    return measure(getattr(args, "b6_requests", REQUESTS), pages, postgres_url(args.postgres))


def measure(requests: int, pages: dict[str, tuple[int, int]],
            postgres: str | None) -> dict[str, Any]:
    """`requests` timed GETs of each page at its two sizes (`pages`: the smaller and the larger,
    for "evidence" and "inbox"), on SQLite and, when `postgres` names a server, on PostgreSQL:
    each database in a fresh interpreter."""
    params = {"requests": requests, "warmup": WARMUP, "change_bytes": CHANGE_BYTES,
              "sizes": {page: list(pages[page]) for page in PAGES if page in pages}}
    result: dict[str, Any] = {"params": params, "databases": {}}
    for label in database_labels(postgres):
        with database_env(label, postgres) as env:
            result["databases"][label] = isolated(measure_database, label, params, env=env)
    return result


def proposal(size: int) -> dict[str, Any]:
    """A ready proposal with `size` file checks and `size` critical claims (the first claim
    covers every check, each other claim one of them)."""
    checks: list[dict[str, Any]] = [{"id": "readme-exists", "kind": "file_exists",
                                     "path": "README.md"}]
    checks += [{"id": f"readme-has-{n}", "kind": "file_contains", "path": "README.md",
                "text": f"## Section {n}"} for n in range(1, size)]
    ids = [check["id"] for check in checks]
    claims = [{"id": f"claim-{n}", "statement": f"README.md satisfies requirement {n}",
               "importance": "critical", "verification": "deterministic",
               "check_ids": ids if n == 0 else [ids[n % len(ids)]]} for n in range(size)]
    return {"objective": f"Write README.md with {size} sections and an Install section",
            "claims": claims, "checks": checks, "intent": INTENT}


def file_text(index: int, size: int, *, after: bool) -> str:
    """One changed file of a delivered change: `size` bytes of numbered lines, every line
    rewritten in the delivered tree."""
    word = "delivered" if after else "original"
    line = f"{word} line of file {index:04}: " + "x" * 40
    return "".join(f"{line} {n:05}\n" for n in range(max(1, size // (len(line) + 7))))


def measure_database(label: str, params: dict[str, Any]) -> dict[str, Any]:
    django_setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from governor.models import Membership, Project, Role
    from governor.services.contracts import contract_begin, turn_stop
    from governor.services.reviews import review_decide
    from governor.services.sessions import session_create
    from governor.services.tokens import token_create
    from reviews.models import Review, Stage
    from reviews.views import INBOX_PAGE_SIZE

    tag = f"[B6 {label}]"
    workspace = settings.VAR_DIR / "workspace"
    workspace.mkdir()
    users = get_user_model()
    agent_owner = users.objects.create_user("bench-agent-owner")

    def project_with_reviewer(slug: str) -> tuple[Any, Any, Any]:
        project = Project.objects.create(slug=slug, name=slug.title(), review_mode="required",
                                         max_checks=100, workspace_roots=[str(settings.VAR_DIR)])
        created, _ = token_create(project=project, name=f"{slug} agent", owner=agent_owner)
        # As the API has it: loaded from the database (a fresh in-memory Project holds enum
        # members, not the stored strings, which receipts cannot canonicalise).
        token = type(created).objects.select_related("project").get(pk=created.pk)
        user = users.objects.create_user(f"reviewer-{slug}", f"{slug}@example.com",
                                         "bench-password-1")
        Membership.objects.create(user=user, project=project, role=Role.REVIEWER)
        return project, token, user

    def propose(token: Any, size: int) -> Review:
        session, _ = session_create(token=token,
                                    workspace={"kind": "path", "path": str(workspace)})
        begun = contract_begin(session=session, token=token, body=proposal(size),
                               kind="general")
        assert begun.status == "review-pending", begun.status
        assert begun.review is not None
        return Review.objects.get(pk=begun.review["id"])

    targets: dict[tuple[str, int], tuple[Client, str, str, int]] = {}
    for size in params["sizes"].get("evidence", []):
        _, token, user = project_with_reviewer(f"evidence-{size}")
        intent = propose(token, size)
        review_decide(user=user, review=intent, receipt=intent.receipt, decision="approved")
        evidence = Review.objects.get(session_id=intent.session_id, stage=Stage.EVIDENCE)
        client = Client(HTTP_HOST="localhost")
        client.force_login(user)
        targets[("evidence", size)] = (client, f"/reviews/{evidence.pk}/", 'class="check"', size)
    for size in params["sizes"].get("inbox", []):
        _, token, user = project_with_reviewer(f"inbox-{size}")
        start = time.perf_counter()
        for n in range(size):
            propose(token, 2)
            if (n + 1) % 250 == 0:
                progress(f"{tag} inbox: {n + 1}/{size} pending reviews proposed")
        progress(f"{tag} {size} pending reviews in {time.perf_counter() - start:.1f} s")
        client = Client(HTTP_HOST="localhost")
        client.force_login(user)
        # The inbox shows a page of INBOX_PAGE_SIZE, saying how many wait in all.
        targets[("inbox", size)] = (client, "/reviews/", 'class="objective-link"',
                                    min(size, INBOX_PAGE_SIZE))

    for size in sorted(set(params["sizes"].get("delivery", [])) | set(params["sizes"].get(
            "changes", []))):
        project, token, user = project_with_reviewer(f"delivery-{size}")
        Project.objects.filter(pk=project.pk).update(review_mode="off",
                                                     delivery_review="required")
        token = type(token).objects.select_related("project").get(pk=token.pk)
        tree = settings.VAR_DIR / f"delivered-{size}"
        (tree / "src").mkdir(parents=True)
        (tree / "README.md").write_text("# Demo\n")
        per_file = params["change_bytes"] // max(size, params["sizes"]["delivery"][1])
        for n in range(size):
            (tree / "src" / f"file_{n:04}.txt").write_text(file_text(n, per_file, after=False))
        session, _ = session_create(token=token, workspace={"kind": "path", "path": str(tree)})
        begun = contract_begin(session=session, token=token, kind="general", body={
            "objective": "Write README.md with an Install section",
            "claims": [{"id": "readme", "statement": "README.md documents installation",
                        "importance": "critical", "verification": "deterministic",
                        "check_ids": ["readme-install"]}],
            "checks": [{"id": "readme-install", "kind": "file_contains", "path": "README.md",
                        "text": "## Install"}]})
        assert begun.status == "active", begun.status
        (tree / "README.md").write_text("# Demo\n\n## Install\n")
        for n in range(size):
            (tree / "src" / f"file_{n:04}.txt").write_text(file_text(n, per_file, after=True))
        start = time.perf_counter()
        turn_stop(session=session, token=token)
        progress(f"{tag} delivered change of {size + 1} files judged in "
                 f"{time.perf_counter() - start:.1f} s")
        delivery = Review.objects.get(session=session, stage=Stage.DELIVERY)
        client = Client(HTTP_HOST="localhost")
        client.force_login(user)
        if size in params["sizes"].get("delivery", []):
            targets[("delivery", size)] = (client, f"/reviews/{delivery.pk}/", FILE_ROW,
                                           size + 1)
        if size in params["sizes"].get("changes", []):
            targets[("changes", size)] = (client, f"/sessions/{session.pk}/changes",
                                          FILE_ROW, size + 1)

    ms: dict[tuple[str, int], list[float]] = {key: [] for key in targets}
    queries: dict[tuple[str, int], set[int]] = {key: set() for key in targets}
    sizes: dict[tuple[str, int], int] = {}
    for round_no in range(params["warmup"] + params["requests"]):
        for key, (client, url, marker, count) in targets.items():
            with CaptureQueriesContext(connection) as captured:
                start = time.perf_counter()
                response = client.get(url)
                elapsed = time.perf_counter() - start
            if response.status_code != 200:
                raise AssertionError(f"B6 {url} answered {response.status_code}")
            html = response.content.decode()
            if html.count(marker) != count:
                raise AssertionError(f"B6 {key}: {html.count(marker)} × {marker}, "
                                     f"expected {count}")
            if round_no >= params["warmup"]:
                ms[key].append(elapsed * 1000)
                queries[key].add(len(captured.captured_queries))
                sizes[key] = len(response.content)
        if (round_no + 1) % 10 == 0:
            progress(f"{tag} round {round_no + 1}/{params['warmup'] + params['requests']}: "
                     + ", ".join(f"{page} {size:,}: {median(ms[(page, size)]):.1f} ms"
                                 for page, size in targets if ms[(page, size)]))
    return {
        "database": database_version(connection),
        "pages": {page: {str(size): {
            "median_ms": round(median(ms[(page, size)]), 2),
            "p95_ms": round(p95(ms[(page, size)]), 2),
            "min_ms": round(min(ms[(page, size)]), 2),
            "queries": sorted(queries[(page, size)]),
            "bytes": sizes[(page, size)],
        } for size in page_sizes} for page, page_sizes in params["sizes"].items()},
    }


# --- in the parent: reporting -----------------------------------------------------------------

WHAT = {"evidence": "evidence page, claims = checks =", "inbox": "inbox, pending reviews =",
        "delivery": "delivery page, changed files =", "changes": "changes page, changed files ="}


def table(result: dict[str, Any]) -> str:
    rows = []
    for r in result["databases"].values():
        for page, sizes in r["pages"].items():
            for size, s in sizes.items():
                rows.append([r["database"], f"{WHAT[page]} {int(size):,}",
                             f"{s['median_ms']:.1f}", f"{s['p95_ms']:.1f}",
                             "/".join(map(str, s["queries"])), f"{s['bytes'] / 1024:,.0f}"])
    p = result["params"]
    over = [f"{r['database']} {page} at {larger:,}" for r in result["databases"].values()
            for page, (_, larger) in p["sizes"].items()
            if r["pages"][page][str(larger)]["median_ms"] > CONTEXT_MEDIAN_MS]
    context = f"missed by {', '.join(over)}" if over else "met"
    ratios = "; ".join(f"{r['database']} {ratio:.2f}×" for r in result["databases"].values()
                       if (ratio := delivery_ratio(p, r)) is not None)
    note = (f"{p['requests']} timed GETs per page and size after {p['warmup']} warm-up rounds, "
            f"the pages in turn; server time in-process (Django test `Client`, logged in). The "
            f"larger delivered change is {p.get('change_bytes', CHANGE_BYTES) / 2**20:g} MiB of "
            f"text. Goals: the same query count at both sizes; the delivery page's median at the "
            f"larger size ≤ {DELIVERY_OVER_EVIDENCE:g}× the evidence page's"
            f"{f' ({ratios})' if ratios else ''}. Context, not gated: the design's median "
            f"≤ {CONTEXT_MEDIAN_MS:g} ms at the larger size — {context} here.")
    header = ["database", "page", "median ms", "p95 ms", "SQL queries", "KiB"]
    return markdown_table(header, rows) + "\n\n" + note


def delivery_ratio(params: dict[str, Any], database: dict[str, Any]) -> float | None:
    """The delivery page's median over the evidence page's, each at its larger size."""
    if "delivery" not in database["pages"] or "evidence" not in database["pages"]:
        return None
    delivery = database["pages"]["delivery"][str(params["sizes"]["delivery"][1])]
    evidence = database["pages"]["evidence"][str(params["sizes"]["evidence"][1])]
    return float(delivery["median_ms"]) / max(float(evidence["median_ms"]), 1e-9)


def gates(result: dict[str, Any]) -> list[str]:
    failed = []
    for label, r in result["databases"].items():
        ratio = delivery_ratio(result["params"], r)
        if ratio is not None and ratio > DELIVERY_OVER_EVIDENCE:
            failed.append(f"{label}: the delivery page took {ratio:.2f}× the evidence page's "
                          f"time (at most {DELIVERY_OVER_EVIDENCE:g}×)")
    for label, r in result["databases"].items():
        for page, sizes in r["pages"].items():
            smaller, larger = result["params"]["sizes"][page]
            small, large = sizes[str(smaller)], sizes[str(larger)]
            if small["queries"] != large["queries"] or len(large["queries"]) != 1:
                failed.append(f"{label} {page}: queries {small['queries']} at "
                              f"{smaller:,} vs {large['queries']} at {larger:,}")
    return failed
