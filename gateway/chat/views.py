from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.csrf import ensure_csrf_cookie

from inference.models import ModelDeployment


@login_required
@ensure_csrf_cookie
def chat_page(request: HttpRequest) -> HttpResponse:
    models = list(ModelDeployment.objects.values_list("name", flat=True))
    return render(request, "chat/chat.html", {"models": models})
