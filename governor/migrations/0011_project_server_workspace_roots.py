"""The demo project's use of GOVERNOR_WORKSPACE_ROOTS becomes a project setting."""

from django.db import migrations, models


def demo_keeps_the_server_roots(apps, schema_editor):
    apps.get_model("governor", "Project").objects.filter(slug="demo").update(
        server_workspace_roots=True)


class Migration(migrations.Migration):
    dependencies = [("governor", "0010_project_require_signed_approvals")]

    operations = [
        migrations.AddField(
            model_name="project",
            name="server_workspace_roots",
            field=models.BooleanField(
                default=False, help_text="Agents may also bind sessions under the server's "
                                         "GOVERNOR_WORKSPACE_ROOTS (on for the demo project)."),
        ),
        migrations.RunPython(demo_keeps_the_server_roots, migrations.RunPython.noop),
    ]
