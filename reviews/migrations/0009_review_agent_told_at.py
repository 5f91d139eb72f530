"""Issue 40: a delivery's decision reaches the agent at its next turn-stop, once as a steer; the
review remembers when it did."""

from django.db import migrations, models


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
    ]
