"""Events are never updated or deleted: the database itself refuses it (docs/architecture.md)."""

from django.db import migrations

SQLITE = [
    """CREATE TRIGGER governor_event_no_update BEFORE UPDATE ON governor_event
       BEGIN SELECT RAISE(ABORT, 'governor_event is append-only: UPDATE refused'); END""",
    """CREATE TRIGGER governor_event_no_delete BEFORE DELETE ON governor_event
       BEGIN SELECT RAISE(ABORT, 'governor_event is append-only: DELETE refused'); END""",
]
SQLITE_DROP = [
    "DROP TRIGGER IF EXISTS governor_event_no_update",
    "DROP TRIGGER IF EXISTS governor_event_no_delete",
]
POSTGRES = [
    """CREATE FUNCTION governor_event_append_only() RETURNS trigger AS $$
       BEGIN RAISE EXCEPTION 'governor_event is append-only: % refused', TG_OP; END;
       $$ LANGUAGE plpgsql""",
    """CREATE TRIGGER governor_event_append_only BEFORE UPDATE OR DELETE ON governor_event
       FOR EACH ROW EXECUTE FUNCTION governor_event_append_only()""",
]
POSTGRES_DROP = [
    "DROP TRIGGER IF EXISTS governor_event_append_only ON governor_event",
    "DROP FUNCTION IF EXISTS governor_event_append_only()",
]


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        for statement in statements_by_vendor.get(schema_editor.connection.vendor, []):
            schema_editor.execute(statement, params=None)

    return run


class Migration(migrations.Migration):
    dependencies = [("governor", "0001_initial")]

    operations = [
        migrations.RunPython(
            _run({"sqlite": SQLITE, "postgresql": POSTGRES}),
            _run({"sqlite": SQLITE_DROP, "postgresql": POSTGRES_DROP}),
        )
    ]
