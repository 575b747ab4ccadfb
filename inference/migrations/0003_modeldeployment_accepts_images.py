from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("inference", "0002_modeldeployment_routing_policy"),
    ]

    operations = [
        migrations.AddField(
            model_name="modeldeployment",
            name="accepts_images",
            field=models.BooleanField(
                default=False,
                help_text="the model takes image_url content parts (a vision model); text only otherwise",
            ),
        ),
    ]
