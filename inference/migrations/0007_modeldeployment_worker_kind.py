from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('inference', '0006_modeldeployment_batch_discount_percent'),
    ]

    operations = [
        migrations.AddField(
            model_name='modeldeployment',
            name='worker_kind',
            field=models.CharField(choices=[('vllm', 'vLLM (the real model)'), ('simulated', 'Simulated (python -m inference.sim: fake text, for tests)')], default='vllm', help_text='what its workers are; the autoscaler starts only this kind of replica (simulated: the vLLM-compatible simulator, for tests, replays and demos)', max_length=10),
        ),
    ]
