from django.urls import path

from gateway.api import views

urlpatterns = [
    path("chat/completions", views.chat_completions, name="chat-completions"),
    path("models", views.models, name="models"),
    path("cache/false-hits", views.report_false_hit, name="cache-false-hits"),
]
