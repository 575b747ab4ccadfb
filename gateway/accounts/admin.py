from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.forms import ModelForm
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from gateway.accounts import actions
from gateway.accounts.models import ApiKey, DefaultQuotaPolicy, Membership, QuotaPolicy, Team
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


class LengthPolicyField(forms.TypedChoiceField):
    """max_tokens_policy in a form: absent means refuse (the default), so a form posted
    without it (an older client, a script) neither fails nor counts as a change."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.pop("max_length", None)
        kwargs.update(required=False, empty_value=QuotaPolicy.LengthPolicy.REFUSE.value)
        super().__init__(**kwargs)

    def has_changed(self, initial: Any, data: Any) -> bool:
        refuse = QuotaPolicy.LengthPolicy.REFUSE.value
        return str(initial or refuse) != str(data or refuse)


class QuotaPolicyForm(ModelForm):  # type: ignore[type-arg]
    max_tokens_policy = LengthPolicyField(
        choices=QuotaPolicy.LengthPolicy.choices,
        help_text=QuotaPolicy._meta.get_field("max_tokens_policy").help_text,
    )

    class Meta:
        model = QuotaPolicy
        fields = ["team", *actions.QUOTA_FIELDS, "max_tokens_policy"]


class QuotaPolicyInline(admin.StackedInline):  # type: ignore[type-arg]
    """A team's own policy. Without one the form shows the platform default's values and,
    left unchanged, saves nothing: the team keeps following the default. Deleting it puts
    the team back on the default."""

    model = QuotaPolicy
    form = QuotaPolicyForm
    verbose_name = "own quota policy (unchanged: the team follows the default quota policy)"


@admin.register(Team)
class TeamAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["name", "slug", "created_at"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [QuotaPolicyInline, MembershipInline]

    def get_formset_kwargs(
        self,
        request: HttpRequest,
        obj: Team,
        inline: admin.options.InlineModelAdmin,  # type: ignore[type-arg]
        prefix: str,
    ) -> dict[str, Any]:
        kwargs: dict[str, Any] = super().get_formset_kwargs(request, obj, inline, prefix)
        if isinstance(inline, QuotaPolicyInline):
            kwargs["initial"] = [actions.default_policy_values()]
        return kwargs

    def save_related(
        self,
        request: HttpRequest,
        form: ModelForm,  # type: ignore[type-arg]
        formsets: Any,
        change: bool,
    ) -> None:
        super().save_related(request, form, formsets, change)
        # The inline saved (or deleted) the policy directly; share it so every process sees
        # it ("missing": the team follows the default).
        policy = QuotaPolicy.objects.filter(team=form.instance).first()
        limits = None if policy is None else quota_limits_from_row(policy)
        team_limits.publish(str(form.instance.pk), limits)


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    list_display = ["user", "team", "role"]
    list_filter = ["role", "team"]


@admin.register(QuotaPolicy)
class QuotaPolicyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Teams' own policies; deleting one puts its team back on the default."""

    form = QuotaPolicyForm
    list_display = ["team", *actions.QUOTA_FIELDS, "max_tokens_policy"]
    fields = ["team", *actions.QUOTA_FIELDS, "max_tokens_policy"]

    def get_changeform_initial_data(self, request: HttpRequest) -> dict[str, Any]:
        # A new policy starts as the default: a field left as shown keeps the default's
        # limit, where an empty one would mean "unlimited".
        initial: dict[str, Any] = super().get_changeform_initial_data(request)
        return {**actions.default_policy_values(), **initial}

    def save_model(self, request: HttpRequest, obj: QuotaPolicy, form: Any, change: bool) -> None:
        changes = {name: getattr(obj, name) for name in actions.QUOTA_FIELDS}
        actions.update_quota_policy(obj.team, **changes)

    def delete_model(self, request: HttpRequest, obj: QuotaPolicy) -> None:
        actions.use_default_quota(obj.team)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[QuotaPolicy]) -> None:
        for policy in queryset.select_related("team"):
            actions.use_default_quota(policy.team)


@admin.register(DefaultQuotaPolicy)
class DefaultQuotaPolicyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """The one platform default, changed in place: nothing to add or delete, and the list
    goes straight to it. Changing it needs accounts.change_defaultquotapolicy."""

    fields = [*actions.QUOTA_FIELDS, "updated_at"]
    readonly_fields = ["updated_at"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if not self.has_view_or_change_permission(request):
            return super().changelist_view(request, extra_context)  # Django's refusal
        policy = DefaultQuotaPolicy.load()
        return HttpResponseRedirect(
            reverse("admin:accounts_defaultquotapolicy_change", args=[policy.pk])
        )

    def save_model(
        self, request: HttpRequest, obj: DefaultQuotaPolicy, form: Any, change: bool
    ) -> None:
        changes = {name: getattr(obj, name) for name in actions.QUOTA_FIELDS}
        actions.update_default_quota(**changes)


class ApiKeyForm(ModelForm):  # type: ignore[type-arg]
    def clean(self) -> dict[str, Any]:
        """A new key past the team's MAX_KEYS_PER_TEAM is an error on the form, not a 500
        from saving it (issue_api_key checks again, under the team's row lock)."""
        cleaned: dict[str, Any] = super().clean() or {}
        team = cleaned.get("team")
        if self.instance.pk is None and team is not None:
            try:
                actions.check_live_keys(team)
            except ValidationError as exc:
                raise ValidationError(exc.message_dict.get("team", exc.messages)) from None
        return cleaned


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    form = ApiKeyForm
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
    actions = ["revoke_selected", "revoke_selected_and_their_keys"]

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

    # permissions: without them, Django offers an action to anyone who can open the list,
    # a staff account with view rights only included.
    @admin.action(description="Revoke selected API keys", permissions=["change"])
    def revoke_selected(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        for key in queryset:
            actions.revoke_api_key(key)
        self.message_user(request, f"Revoked {queryset.count()} key(s).")

    @admin.action(
        description="Revoke selected API keys and every key made with them",
        permissions=["change"],
    )
    def revoke_selected_and_their_keys(
        self, request: HttpRequest, queryset: QuerySet[ApiKey]
    ) -> None:
        """A leaked manage key: the keys minted with it through the management API (and
        theirs) are revoked with it."""
        revoked = {
            k.lookup_id for key in queryset for k in actions.revoke_api_key_and_its_keys(key)
        }
        self.message_user(request, f"Revoked {len(revoked)} key(s).")
