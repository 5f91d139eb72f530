"""The pure rules behind issue 28's diff and revision rounds: hunks that number both sides and
pair a replaced block side by side, renames only when the blob and mode are the same, word
changes joined across the spaces between them, every changed text of a plan old beside new,
and line comments bound into a decision's receipt."""

from __future__ import annotations

from governor.domain.canonical import receipt
from governor.domain.review import decision_payload, plan_texts
from governor.domain.treediff import manifest_changes, text_diff, with_renames, word_diff

BLOB = "a" * 64


def test_a_hunk_numbers_both_sides_and_pairs_a_replaced_block() -> None:
    diff = text_diff(["a", "b", "c"], ["a", "B", "c", "d"])
    (hunk,) = diff.hunks
    assert hunk.header == "@@ -1,3 +1,4 @@"
    assert [(line.kind, line.old, line.new) for line in hunk.lines] == [
        ("context", 1, 1), ("removed", 2, None), ("added", None, 2), ("context", 3, 3),
        ("added", None, 4)]
    removed, added = hunk.rows[1]
    assert (removed and removed.old, added and added.new) == (2, 2)
    assert hunk.rows[-1][0] is None  # an added line has nothing on the old side
    assert (diff.added, diff.removed) == (2, 1)


def test_far_apart_changes_are_two_hunks_with_three_lines_of_context() -> None:
    before = [f"line {n}" for n in range(30)]
    after = ["first", *before[1:20], "twenty", *before[21:]]
    assert [hunk.header for hunk in text_diff(before, after).hunks] == [
        "@@ -1,4 +1,4 @@", "@@ -18,7 +18,7 @@"]


def test_a_removed_blob_that_reappears_elsewhere_is_a_rename_and_a_changed_one_is_not() -> None:
    moved = with_renames(manifest_changes([["old.txt", "100644", BLOB]],
                                          [["new.txt", "100644", BLOB]]))
    assert [(c.kind, c.before and c.before.path, c.path) for c in moved] == [
        ("renamed", "old.txt", "new.txt")]
    other_mode = with_renames(manifest_changes([["old.sh", "100644", BLOB]],
                                               [["new.sh", "100755", BLOB]]))
    assert sorted(c.kind for c in other_mode) == ["added", "removed"]


def test_changed_words_are_marked_and_joined_across_their_spaces() -> None:
    old, new = word_diff("README.md may not exist yet", "README.md may be missing yet")
    assert old == [("README.md may ", False), ("not exist", True), (" yet", False)]
    assert new == [("README.md may ", False), ("be missing", True), (" yet", False)]


def test_every_changed_text_of_a_plan_is_shown_old_beside_new() -> None:
    before = {"objective": "Write it", "intent": {"assumptions": ["x is so", "y"]},
              "claims": [{"id": "c", "statement": "it holds"}],
              "checks": [{"id": "k", "kind": "file_contains", "text": "## A"}],
              "max_attempts": 3}
    after = {"objective": "Write it now", "intent": {"assumptions": ["x is not so", "y", "z"]},
             "claims": [{"id": "c", "statement": "it holds"}, {"id": "d", "statement": "new"}],
             "checks": [{"id": "k", "kind": "file_contains", "text": "## A "}],
             "max_attempts": 2}
    rows = {row.what: row for row in plan_texts(before, after)}
    assert list(rows) == ["Objective", "Assumption", "Claim d (added)", "Check k: text",
                          "Repair budget (attempts)"]
    assert rows["Objective"].after == [("Write it", False), (" now", True)]
    assert rows["Check k: text"].before == [('"## ', False), ('A"', True)]  # exact JSON
    assert rows["Claim d (added)"].before is None
    assert plan_texts(before, before) == []


def test_line_comments_are_bound_by_count_and_receipt_never_their_text() -> None:
    comments = [{"path": "a.py", "side": "new", "line": 3, "body": "why?", "userId": 1}]
    payload = decision_payload(stage="delivery", proposal_receipt="sha256:" + "0" * 64,
                               decision="revision-requested", decided_by={"kind": "reviewer"},
                               feedback="see comments", comments=comments)
    assert payload["commentsCount"] == 1
    assert payload["commentsReceipt"] == receipt("review-comments", comments)
    assert "why?" not in str(payload)
    plain = decision_payload(stage="delivery", proposal_receipt="sha256:" + "0" * 64,
                             decision="approved", decided_by={"kind": "reviewer"})
    assert "commentsCount" not in plain and "commentsReceipt" not in plain
