from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("inference", "0003_modeldeployment_accepts_images"),
    ]

    operations = [
        migrations.AddField(
            model_name="modeldeployment",
            name="kind",
            field=models.CharField(
                choices=[
                    ("chat", "Chat (/v1/chat/completions)"),
                    ("embedding", "Embedding (/v1/embeddings)"),
                ],
                default="chat",
                help_text="chat or embedding; an embedding deployment serving all-minilm-l6-v2 with no workers runs in the gateway itself",
                max_length=10,
            ),
        ),
    ]
