from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "gateway.chat"
    label = "chat"
    verbose_name = "Web chat"
