from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest

from gateway.accounts import actions
from gateway.accounts.models import ApiKey, Membership, QuotaPolicy, Team
from gateway.accounts.records import (
    key_record_from_row,
    key_records,
    quota_limits_from_row,
    team_limits,
)


class MembershipInline(admin.TabularInline):  # type: ignore[type-arg]
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


class QuotaPolicyInline(admin.StackedInline):  # type: ignore[type-arg]
    model = QuotaPolicy
    can_delete = False


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["name", "slug", "created_at"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [QuotaPolicyInline, MembershipInline]

    def save_related(
        self,
        request: HttpRequest,
        form: ModelForm,  # type: ignore[type-arg]
        formsets: Any,
        change: bool,
    ) -> None:
        super().save_related(request, form, formsets, change)
        # The inline saved the policy directly; share it so every process sees it.
        policy = QuotaPolicy.objects.filter(team=form.instance).first()
        team_limits.publish(str(form.instance.pk), quota_limits_from_row(policy))


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["user", "team", "role"]
    list_filter = ["role", "team"]


@admin.register(QuotaPolicy)
class QuotaPolicyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["team", *actions.QUOTA_FIELDS]

    def save_model(self, request: HttpRequest, obj: QuotaPolicy, form: Any, change: bool) -> None:
        changes = {name: getattr(obj, name) for name in actions.QUOTA_FIELDS}
        actions.update_quota_policy(obj.team, **changes)


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["lookup_id", "name", "team", "scopes", "created_at", "expires_at", "revoked_at"]
    list_filter = ["team"]
    search_fields = ["lookup_id", "name", "team__name"]
    readonly_fields = ["lookup_id", "created_at", "revoked_at", "last_used_at", "created_by"]
    fields = [
        "team",
        "name",
        "scopes",
        "allowed_models",
        "requests_per_minute",
        "expires_at",
        *readonly_fields,
    ]
    actions = ["revoke_selected"]

    def save_model(self, request: HttpRequest, obj: ApiKey, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            key_records.publish(obj.lookup_id, key_record_from_row(obj))
            return
        issued = actions.issue_api_key(
            obj.team,
            name=obj.name,
            scopes=tuple(obj.scopes) or actions.DEFAULT_SCOPES,
            allowed_models=tuple(obj.allowed_models),
            requests_per_minute=obj.requests_per_minute,
            expires_at=obj.expires_at,
            created_by=request.user,  # type: ignore[arg-type]
        )
        obj.pk = issued.key.pk
        self.message_user(
            request,
            f"New API key (shown once, copy it now): {issued.plaintext}",
            messages.WARNING,
        )

    @admin.action(description="Revoke selected API keys")
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        for key in queryset:
            actions.revoke_api_key(key)
        self.message_user(request, f"Revoked {queryset.count()} key(s).")
