"""/chat/api/: the web chat's conversations (gateway/chat/api.py)."""

from django.urls import path

from gateway.chat import api

urlpatterns = [
    path("conversations/", api.conversations, name="chat-conversations"),
    path("conversations/<int:conversation_id>/", api.conversation, name="chat-conversation"),
    path("conversations/<int:conversation_id>/messages/", api.messages, name="chat-messages"),
]
