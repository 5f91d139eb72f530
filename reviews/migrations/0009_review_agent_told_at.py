"""Issue 40: a delivery's decision reaches the agent at its next turn-stop, once as a steer; the
review remembers when it did. Reviews decided before this migration count as told at their
decision, so an upgrade does not steer an agent with old news."""

from django.db import migrations, models
from django.db.models import F


def decided_reviews_told(apps, schema_editor):
    Review = apps.get_model("reviews", "Review")
    Review.objects.filter(decided_at__isnull=False).update(agent_told_at=F("decided_at"))


class Migration(migrations.Migration):
    dependencies = [("reviews", "0008_delivery_proposals_bind_evidence")]

    operations = [
        migrations.AddField(
            model_name="review",
            name="agent_told_at",
            field=models.DateTimeField(
                blank=True, null=True,
                help_text="A delivery's decision: when a turn-stop first told the agent of it "
                          "(it is steered with it once, and allowed after)."),
        ),
        migrations.RunPython(decided_reviews_told, migrations.RunPython.noop),
    ]
