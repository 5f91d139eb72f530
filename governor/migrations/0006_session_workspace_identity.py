from django.db import migrations, models

from governor.domain.workspace import identity_at


def record_identities(apps, schema_editor):  # type: ignore[no-untyped-def]
    """Sessions bound before identities were recorded get the identity their directory has now;
    one that no longer opens without a symlink keeps none, and its runs and file checks refuse."""
    Session = apps.get_model("governor", "Session")
    for session in Session.objects.exclude(workspace_path="").iterator():
        try:
            session.workspace_identity = identity_at(session.workspace_path)
        except OSError:
            continue
        session.save(update_fields=["workspace_identity"])


class Migration(migrations.Migration):

    dependencies = [
        ('governor', '0005_token_owner'),
    ]

    operations = [
        migrations.AddField(
            model_name='session',
            name='workspace_identity',
            field=models.CharField(blank=True, max_length=64),
        ),
        migrations.RunPython(record_identities, migrations.RunPython.noop),
    ]
