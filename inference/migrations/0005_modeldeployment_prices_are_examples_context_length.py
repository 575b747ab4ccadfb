import django.core.validators
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("inference", "0004_modeldeployment_kind"),
    ]

    operations = [
        migrations.AddField(
            model_name="modeldeployment",
            name="prices_are_examples",
            field=models.BooleanField(
                default=False,
                help_text="the prices above are documented examples (the demo); the dashboard "
                "says so",
            ),
        ),
        migrations.AddField(
            model_name="modeldeployment",
            name="context_length",
            field=models.PositiveIntegerField(
                blank=True,
                null=True,
                validators=[django.core.validators.MinValueValidator(1)],
                help_text="tokens of prompt plus output the model takes; blank = what its "
                "workers report (vLLM's max_model_len)",
            ),
        ),
    ]
