from django.urls import path

from gateway.api import batches, embeddings, files, views

urlpatterns = [
    path("chat/completions", views.chat_completions, name="chat-completions"),
    path("completions", views.completions, name="completions"),
    path("embeddings", embeddings.embeddings, name="embeddings"),
    path("models", views.models, name="models"),
    # <path:>: a model id may hold slashes (a vLLM served name like org/model).
    path("models/<path:model_id>", views.model, name="model"),
    path("files", files.files, name="files"),
    path("files/<str:file_id>", files.file, name="file"),
    path("files/<str:file_id>/content", files.file_content, name="file-content"),
    path("batches", batches.batches, name="batches"),
    path("batches/<str:batch_id>", batches.batch, name="batch"),
    path("batches/<str:batch_id>/cancel", batches.cancel, name="batch-cancel"),
    path("cache/false-hits", views.report_false_hit, name="cache-false-hits"),
]
