from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0004_default_quota_policy"),
    ]

    operations = [
        migrations.AddField(
            model_name="quotapolicy",
            name="max_tokens_policy",
            field=models.CharField(
                choices=[
                    ("refuse", "Refuse (400 context_length_exceeded / max_tokens_over_cap)"),
                    (
                        "clamp",
                        "Clamp max_tokens to what fits (header x-sluice-max-tokens-clamped)",
                    ),
                ],
                default="refuse",
                help_text="max_tokens over the context window or the cap: refuse, or clamp it "
                "to what fits (a prompt that alone does not fit is always refused)",
                max_length=10,
            ),
        ),
    ]
