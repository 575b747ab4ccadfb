from django.urls import path

from gateway.api import embeddings, views

urlpatterns = [
    path("chat/completions", views.chat_completions, name="chat-completions"),
    path("embeddings", embeddings.embeddings, name="embeddings"),
    path("models", views.models, name="models"),
    # <path:>: a model id may hold slashes (a vLLM served name like org/model).
    path("models/<path:model_id>", views.model, name="model"),
    path("cache/false-hits", views.report_false_hit, name="cache-false-hits"),
]
