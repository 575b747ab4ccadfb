from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.csrf import ensure_csrf_cookie

from inference.models import ModelDeployment
from scaling.routing.tiers import AUTO_MODEL, ROUTED_TIERS


@login_required
@ensure_csrf_cookie
def chat_page(request: HttpRequest) -> HttpResponse:
    """The chat page; its conversations come from /chat/api/ and its replies from the
    socket (static/chat/chat.js). Model "auto" is offered when a deployment has a tier it
    routes to, unless a deployment is itself named "auto"."""
    chat = ModelDeployment.objects.filter(kind=ModelDeployment.Kind.CHAT)  # not embeddings
    deployments = chat.order_by("name").values_list("name", "tier")
    models = [name for name, _ in deployments]
    auto = AUTO_MODEL not in models and any(tier in ROUTED_TIERS for _, tier in deployments)
    return render(request, "chat/chat.html", {"models": models, "auto": auto})
