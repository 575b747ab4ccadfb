# The rollup task reads the ledger by time across all teams; the ledger's own index is
# (team, created_at). This index lives in the dashboard app because the dashboard is its
# only reader; it belongs in gateway/usage/models.py Meta.indexes if the usage app wants it.
from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("dashboard", "0001_initial"),
        ("usage", "0001_initial"),
    ]

    operations = [
        migrations.RunSQL(
            "CREATE INDEX IF NOT EXISTS usage_record_created_at "
            "ON usage_usagerecord (created_at)",
            "DROP INDEX IF EXISTS usage_record_created_at",
        ),
    ]
