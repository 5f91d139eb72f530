"""The certifications of a project (rules §16.2): its certified terminals with their signed
envelopes, by the tree they certify or by session, for `python -m governor.verify --commit
--server`, which checks every envelope against the keys itself."""

from __future__ import annotations

import re
from typing import Any

from governor.domain.lifecycle import ATTEMPT, TERMINAL
from governor.domain.tree import TREE_ID_PREFIX
from governor.lib.errors import Invalid
from governor.models import (
    Attestation,
    Change,
    ChangeVerdict,
    Event,
    Origin,
    Project,
    WorkspaceTree,
)
from governor.selectors.access import session_for_token

TREE_RE = re.compile(r"^gittree:sha256:[0-9a-f]{64}$")
LIMIT = 100  # certifications per answer, the newest first


def certifications_for(*, token: Any, tree: str | None, session: str | None
                       ) -> list[dict[str, Any]]:
    """Certified terminals of the token's project: those whose deciding attempt judged `tree`
    (any exclusions), or every one of `session` (with the certified tree's manifest, so a
    verifier can name the files a commit changed)."""
    if (tree is None) == (session is None):
        raise Invalid("give exactly one of tree and session",
                      details=[{"path": "tree", "message": "one of tree, session"}])
    project: Project = token.project
    events = Event.objects.filter(session__project=project, origin=Origin.GOVERNOR)
    gated: list[dict[str, Any]] = []
    if tree is not None:
        if not TREE_RE.match(tree):
            raise Invalid(f"tree must be {TREE_ID_PREFIX} followed by 64 lowercase hex digits",
                          details=[{"path": "tree", "message": "malformed"}])
        gated = _gated(project, tree)
        # Governor event data is compact JSON text: the id appears exactly so.
        attempts = events.filter(type=ATTEMPT, data__contains=f'"{tree}"')
    else:
        attempts = events.filter(type=ATTEMPT, session=session_for_token(token, session))
    trees: dict[str, tuple[str, str]] = {}
    for attempt in attempts.only("data"):
        ref = attempt.data.get("tree")
        if type(ref) is dict and type(ref.get("id")) is str and (tree is None
                                                                  or ref["id"] == tree):
            trees[str(attempt.data.get("receipt"))] = (ref["id"], str(ref.get("exclusions")))
    terminals = (events.filter(type=TERMINAL, session__in=attempts.values("session"))
                 .order_by("-id")[:LIMIT * 4])
    found = []
    for terminal in terminals:
        data = terminal.data
        key = trees.get(str(data.get("attemptReceipt")))
        if (data.get("status") != "certified" or key is None
                or (terminal.meta or {}).get("imported")):
            continue
        attestation = Attestation.objects.filter(event=terminal).first()
        stored = WorkspaceTree.objects.filter(project=project, tree_id=key[0],
                                              exclusions_digest=key[1]).first()
        if attestation is None or stored is None:
            continue
        item = {"session": str(terminal.session_id), "seq": terminal.seq, "tree": key[0],
                "exclusions": list(stored.exclusions), "exclusionsDigest": key[1],
                "terminalReceipt": data.get("receipt"), "envelope": attestation.envelope,
                "entries": None if session is None else [list(e) for e in stored.manifest]}
        found.append(item)
        if len(found) == LIMIT:
            break
    return [*gated, *found][:LIMIT]


def _gated(project: Project, tree: str) -> list[dict[str, Any]]:
    """rules §19.2: the project's gated changes certified with `tree` as their head, as a
    certification names them (`change:<id>`; the signed subject says the same)."""
    changes = (Change.objects.filter(project=project, head_tree__tree_id=tree,
                                     verdict=ChangeVerdict.CERTIFIED, envelope__isnull=False)
               .select_related("head_tree").order_by("-created_at")[:LIMIT])
    return [{"session": f"change:{change.pk}", "seq": 0, "tree": tree,
             "exclusions": list(change.head_tree.exclusions),
             "exclusionsDigest": change.head_tree.exclusions_digest,
             "terminalReceipt": change.receipt, "envelope": change.envelope, "entries": None}
            for change in changes]
