"""Imports written in chunks (governor/services/sessions.py `session_import`): a session is
`importing` until its last chunk commits, hidden from every read, and a failed or abandoned import
is deleted with its events. The append-only trigger of 0002 now lets the events of such a session
be deleted, and of no other; a second trigger keeps a session whose import finished from ever
being `importing` again (so its events stay undeletable). And the per-token import rate slots."""

import django.db.models.deletion
from django.db import migrations, models

SQLITE = [
    "DROP TRIGGER IF EXISTS governor_event_no_delete",
    """CREATE TRIGGER governor_event_no_delete BEFORE DELETE ON governor_event
       WHEN NOT EXISTS (SELECT 1 FROM governor_session
                        WHERE governor_session.id = OLD.session_id AND governor_session.importing)
       BEGIN SELECT RAISE(ABORT, 'governor_event is append-only: DELETE refused'); END""",
    """CREATE TRIGGER governor_session_import_once BEFORE UPDATE OF importing ON governor_session
       WHEN NOT OLD.importing AND NEW.importing
       BEGIN SELECT RAISE(ABORT, 'governor_session: an import that finished cannot be reopened');
       END""",
]
SQLITE_BACK = [
    "DROP TRIGGER IF EXISTS governor_session_import_once",
    "DROP TRIGGER IF EXISTS governor_event_no_delete",
    """CREATE TRIGGER governor_event_no_delete BEFORE DELETE ON governor_event
       BEGIN SELECT RAISE(ABORT, 'governor_event is append-only: DELETE refused'); END""",
]
POSTGRES = [
    """CREATE OR REPLACE FUNCTION governor_event_append_only() RETURNS trigger AS $$
       BEGIN
         IF TG_OP = 'DELETE' AND EXISTS (SELECT 1 FROM governor_session
                                         WHERE id = OLD.session_id AND importing) THEN
           RETURN OLD;
         END IF;
         RAISE EXCEPTION 'governor_event is append-only: % refused', TG_OP;
       END;
       $$ LANGUAGE plpgsql""",
    """CREATE FUNCTION governor_session_import_once() RETURNS trigger AS $$
       BEGIN
         IF NOT OLD.importing AND NEW.importing THEN
           RAISE EXCEPTION 'governor_session: an import that finished cannot be reopened';
         END IF;
         RETURN NEW;
       END;
       $$ LANGUAGE plpgsql""",
    """CREATE TRIGGER governor_session_import_once BEFORE UPDATE OF importing ON governor_session
       FOR EACH ROW EXECUTE FUNCTION governor_session_import_once()""",
]
POSTGRES_BACK = [
    "DROP TRIGGER IF EXISTS governor_session_import_once ON governor_session",
    "DROP FUNCTION IF EXISTS governor_session_import_once()",
    """CREATE OR REPLACE FUNCTION governor_event_append_only() RETURNS trigger AS $$
       BEGIN RAISE EXCEPTION 'governor_event is append-only: % refused', TG_OP; END;
       $$ LANGUAGE plpgsql""",
]


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        for statement in statements_by_vendor.get(schema_editor.connection.vendor, []):
            schema_editor.execute(statement, params=None)

    return run


class Migration(migrations.Migration):

    dependencies = [
        ('governor', '0013_wait_slots_unlogged'),
    ]

    operations = [
        migrations.AddField(
            model_name='session',
            name='importing',
            field=models.BooleanField(default=False),
        ),
        migrations.RunPython(
            _run({"sqlite": SQLITE, "postgresql": POSTGRES}),
            _run({"sqlite": SQLITE_BACK, "postgresql": POSTGRES_BACK}),
        ),
        migrations.CreateModel(
            name='ImportSlot',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('slot', models.PositiveSmallIntegerField()),
                ('until', models.DateTimeField(help_text='When the slot may start another import.')),
                ('token', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='governor.agenttoken')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('token', 'slot'), name='one_import_per_token_slot')],
            },
        ),
    ]
