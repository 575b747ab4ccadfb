"""The Tuning page: cache policy (global or one team) and autoscale policy (one
deployment) forms, the audit log, and one-click revert. Beside the autoscale form: whether
the autoscaler loop runs (its heartbeat in Redis) and what the policy does to the fleet."""

from collections.abc import Callable
from typing import Any, cast

from django.contrib import messages
from django.contrib.admin.views.decorators import staff_member_required
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured, PermissionDenied, ValidationError
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from caching import lookup_log
from foundation.redis_clients import REDIS_FAILURES, sync_redis
from gateway.accounts.models import Team
from gateway.dashboard import actions, threshold_effect
from gateway.dashboard.forms import AutoscalePolicyForm, CachePolicyForm, changed_values
from gateway.dashboard.models import TuningChange
from gateway.dashboard.params import is_row_id
from inference.models import ModelDeployment, Worker
from scaling.autoscale.status import LoopStatus, loop_status
from scaling.models import AutoscalePolicy

AUDIT_ROWS = 50


def _scope(request: HttpRequest) -> tuple[Team | None, ModelDeployment | None]:
    source = request.POST if request.method == "POST" else request.GET
    team_id, deployment_id = source.get("team") or "", source.get("deployment") or ""
    team = get_object_or_404(Team, pk=team_id) if is_row_id(team_id) else None
    deployment = (
        get_object_or_404(ModelDeployment, pk=deployment_id)
        if is_row_id(deployment_id)
        else ModelDeployment.objects.first()
    )
    return team, deployment


def _changes(teams_too: bool) -> QuerySet[TuningChange]:
    """The audit log; without the permission to read teams' cache policies, only the
    changes that name no team (the global cache policy, autoscaling)."""
    changes = TuningChange.objects.select_related("user", "team", "deployment")
    return changes if teams_too else changes.filter(team__isnull=True)


def _autoscale_instance(deployment: ModelDeployment | None) -> AutoscalePolicy | None:
    if deployment is None:
        return None
    return AutoscalePolicy.objects.filter(deployment=deployment).first() or AutoscalePolicy(
        deployment=deployment
    )


# Staff read the tuning page; changing a policy takes the model's change permission, as in
# the admin (superusers have every permission).
CACHE_PERMISSION = "caching.change_cachepolicy"
VIEW_CACHE_PERMISSION = "caching.view_cachepolicy"  # changing one implies reading it
AUTOSCALE_PERMISSION = "scaling.change_autoscalepolicy"


def require(request: HttpRequest, permission: str) -> None:
    if not request.user.has_perm(permission):
        raise PermissionDenied(f"Changing this policy needs the permission {permission}.")


def staff_user(request: HttpRequest) -> User:
    """The logged-in staff user (the decorators have already turned everyone else away)."""
    return cast(User, request.user)


@staff_member_required
def tuning(request: HttpRequest) -> HttpResponse:
    team, deployment = _scope(request)
    # One team's policy and its lookups' preview: the management API's permission.
    may_read = any(request.user.has_perm(p) for p in (VIEW_CACHE_PERMISSION, CACHE_PERMISSION))
    if team is not None and not may_read:
        raise PermissionDenied(
            f"A team's cache policy needs the permission {VIEW_CACHE_PERMISSION}."
        )
    cache_form = CachePolicyForm(initial=actions.current_cache_values(team))
    instance = _autoscale_instance(deployment)
    autoscale_form = AutoscalePolicyForm(instance=instance) if instance else None
    which, user = request.POST.get("form"), staff_user(request)
    effect: dict[str, Any] | None = None
    if request.method == "POST" and which == "cache" and "preview" in request.POST:
        cache_form = CachePolicyForm(request.POST)  # shown again as submitted; nothing saved
        if cache_form.is_valid():
            effect = _threshold_effect(team, cache_form)
    elif request.method == "POST" and which == "cache":
        require(request, CACHE_PERMISSION)
        cache_form = CachePolicyForm(request.POST)
        if cache_form.is_valid() and _apply(
            request, cache_form, lambda values: actions.change_cache_policy(user, team, values)
        ):
            return _back(team, deployment)
    elif request.method == "POST" and which == "autoscale" and instance and deployment:
        require(request, AUTOSCALE_PERMISSION)
        autoscale_form = AutoscalePolicyForm(request.POST, instance=instance)
        if autoscale_form.is_valid() and _apply(
            request,
            autoscale_form,
            lambda values: actions.change_autoscale_policy(user, deployment, values),
        ):
            return _back(team, deployment)
    return render(
        request,
        "dashboard/tuning.html",
        {
            "team": team,
            "deployment": deployment,
            "teams": Team.objects.all(),
            "deployments": ModelDeployment.objects.all(),
            "cache_form": cache_form,
            "autoscale_form": autoscale_form,
            "periods": [],
            "effect": effect,
            "changes": _changes(may_read)[:AUDIT_ROWS],
            "charts": [],
            "autoscaler": _autoscaler(deployment, instance) if instance and deployment else None,
        },
    )


def _autoscaler(deployment: ModelDeployment, policy: AutoscalePolicy) -> dict[str, Any]:
    """Whether the loop runs, and what the saved policy does to this deployment's fleet."""
    try:
        loop, error = loop_status(sync_redis()), ""
    except (*REDIS_FAILURES, ImproperlyConfigured) as exc:
        loop, error = None, f"Redis did not answer ({exc})"
    return {"loop": loop, "error": error, "effect": _effect(deployment, policy, loop)}


def _effect(
    deployment: ModelDeployment, policy: AutoscalePolicy, loop: LoopStatus | None
) -> list[str]:
    name = deployment.name
    if policy.pk is None:
        return [f"{name} has no autoscale policy yet: saving the form creates one."]
    if not policy.enabled:
        return [f"Disabled: the loop leaves {name} alone; its workers stay as they are."]
    serving = list(
        Worker.objects.filter(
            deployment=deployment, state__in=[Worker.State.READY, Worker.State.STARTING]
        ).values_list("registered_by", flat=True)
    )
    others = sum(1 for by in serving if not by.startswith("autoscaler"))
    lines = [
        f"Enabled: the loop keeps {policy.min_replicas} to {policy.max_replicas} serving "
        f"replicas of {name}, plus {policy.warm_pool} warm. Serving now: {len(serving)}"
        + (
            f", of which {others} not started by the autoscaler (never drained or stopped)."
            if others
            else "."
        )
    ]
    if len(serving) < policy.min_replicas:
        lines.append(f"At its next tick it starts {policy.min_replicas - len(serving)} replica(s).")
    elif len(serving) > policy.max_replicas:
        lines.append(
            f"At its next tick it drains up to {len(serving) - policy.max_replicas} replica(s) "
            "it started, and stops each once its streams finish."
        )
    if deployment.worker_kind == ModelDeployment.WorkerKind.SIMULATED:
        lines.append(
            "Replicas it starts are simulator processes (fake text): this deployment is "
            "marked simulated."
        )
    else:
        where = (
            " on this host (only for the embedded model)"
            if loop is None or loop.actuator == "local"
            else f" ({loop.actuator} actuator)"
        )
        lines.append(f"Replicas it starts are vLLM servers{where}, never simulators.")
    return lines


def _threshold_effect(team: Team | None, form: CachePolicyForm) -> dict[str, Any]:
    """The proposed threshold's predicted effect against the one in force, on the scope's
    recent semantic lookups (docs/dashboard.md)."""
    in_force = actions.current_cache_values(team)
    current = (in_force["similarity_threshold"], in_force["verify_enabled"])
    proposed = (form.cleaned_data["similarity_threshold"], form.cleaned_data["verify_enabled"])
    try:
        samples = threshold_effect.recent_samples(team)
    except REDIS_FAILURES as exc:
        return {"error": f"the lookup log could not be read: {exc}"}
    bounds = (in_force["max_false_hit_rate"], form.cleaned_data["max_false_hit_rate"])
    preview = threshold_effect.preview(samples, current, proposed, bounds)
    rows = [("in force", preview.current), ("proposed", preview.proposed)] if preview else []
    bound_rows = [
        (label, effect)
        for label, effect in (
            ("in force", preview and preview.current_bound),
            ("proposed", preview and preview.proposed_bound),
        )
        if effect
    ]
    return {
        "preview": preview,
        "rows": rows,
        "bound_rows": bound_rows,
        "window": lookup_log.KEEP,
    }


def _apply(request: HttpRequest, form: Any, change: Callable[[dict[str, Any]], object]) -> bool:
    """Run an action on the form's values; its validation errors land on the form."""
    try:
        change(changed_values(form))
    except actions.NothingChanged:
        messages.info(request, "Nothing changed: every value equals the current one.")
        return True
    except ValidationError as exc:
        for field, errors in exc.message_dict.items():
            form.add_error(field if field in form.fields else None, errors)
        return False
    messages.success(request, "Saved; every gateway process follows within 2 seconds.")
    return True


def _back(team: Team | None, deployment: ModelDeployment | None) -> HttpResponseRedirect:
    query = f"?team={team.pk if team else ''}&deployment={deployment.pk if deployment else ''}"
    return HttpResponseRedirect(reverse("dashboard:tuning") + query)


@require_POST
@staff_member_required
def revert(request: HttpRequest, pk: int) -> HttpResponse:
    change = get_object_or_404(TuningChange, pk=pk)
    cache = change.target == TuningChange.Target.CACHE
    require(request, CACHE_PERMISSION if cache else AUTOSCALE_PERMISSION)
    try:
        actions.revert(staff_user(request), change)
    except actions.NothingChanged:
        messages.info(request, "Nothing to revert: the old values are already in force.")
    except ValidationError as exc:
        messages.error(request, f"Revert refused: {'; '.join(exc.messages)}")
    else:
        messages.success(request, f"Reverted change #{change.pk}.")
    return _back(change.team, change.deployment)
