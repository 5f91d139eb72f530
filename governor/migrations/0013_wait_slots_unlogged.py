"""On PostgreSQL the wait slots are an UNLOGGED table: a slot is a long poll in progress, which
a crash of the database server ends anyway (its table comes back empty), so its rows skip the
write-ahead log and a claim or release commits without waiting for the disk."""

from django.db import migrations


def unlogged(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        table = schema_editor.quote_name(apps.get_model("governor", "WaitSlot")._meta.db_table)
        schema_editor.execute(f"ALTER TABLE {table} SET UNLOGGED")


def logged(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        table = schema_editor.quote_name(apps.get_model("governor", "WaitSlot")._meta.db_table)
        schema_editor.execute(f"ALTER TABLE {table} SET LOGGED")


class Migration(migrations.Migration):

    dependencies = [
        ('governor', '0012_wait_slots_for_users'),
    ]

    operations = [
        migrations.RunPython(unlogged, logged),
    ]
