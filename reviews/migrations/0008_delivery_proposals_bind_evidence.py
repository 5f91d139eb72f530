"""Rules §17.10: a delivery proposal binds the evidence its terminal cites and names the agent
tokens that did the work. A delivery review still pending from before holds neither: it gets the
evidence its plan kept, under a new receipt (a pending proposal's receipt is in no log yet), and
expires now — nobody approves it without the record of who did the work; it counts as a revision
request, and the agent's next passing attempt opens a delivery review that has the record."""

from django.db import migrations
from django.utils import timezone

from governor.domain.review import proposal_receipt


def bind_pending_deliveries(apps, schema_editor):
    Review = apps.get_model("reviews", "Review")
    for review in Review.objects.filter(stage="delivery", status="pending"):
        if "tokens" in review.proposal:
            continue
        kept = review.plan.get("evidence") or {}
        review.proposal = {**review.proposal,
                           "profileReceipts": sorted(set(kept.get("profile_receipts", []))),
                           "runReceipts": sorted(set(kept.get("run_receipts", []))),
                           "changesDigest": kept.get("changes_digest"), "tokens": []}
        review.receipt = proposal_receipt("delivery", review.proposal)
        review.expires_at = timezone.now()
        review.save(update_fields=["proposal", "receipt", "expires_at"])


class Migration(migrations.Migration):
    dependencies = [("reviews", "0006_line_comments")]

    operations = [migrations.RunPython(bind_pending_deliveries, migrations.RunPython.noop)]
