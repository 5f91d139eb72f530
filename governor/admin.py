"""Operators' admin: projects, members, tokens; sessions and events read-only."""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.contrib import admin, messages
from django.db import models
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html

from governor.models import (
    AgentToken,
    AuthoringMode,
    DraftRoute,
    Event,
    Membership,
    Project,
    Session,
    SigningKey,
    TokenKind,
)
from governor.services.tokens import token_create, token_revoke
from reviews.models import Passkey


class MembershipInline(admin.TabularInline[Membership, Project]):
    model = Membership
    extra = 1
    readonly_fields = ("passkeys",)

    @admin.display(description="passkeys")
    def passkeys(self, membership: Membership) -> str:
        """Which reviewers can sign their decisions (issue 18): their passkeys, by name."""
        if membership.user_id is None:
            return ""
        names = list(Passkey.objects.filter(user_id=membership.user_id, removed_at__isnull=True)
                     .order_by("created_at").values_list("name", flat=True))
        return ", ".join(names) if names else "none (cannot sign)"


class DraftRouteInline(admin.StackedInline[DraftRoute, Project]):
    """rules §9: the exact route of `auxiliary-model` authoring. The key itself is never
    entered here: only the environment variable or file that holds it."""

    model = DraftRoute
    extra = 0
    max_num = 1
    verbose_name = "drafting route (auxiliary-model authoring)"
    verbose_name_plural = verbose_name
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    fields = ("provider", "base_url", "model", "reasoning_effort", "max_output_tokens",
              "timeout_seconds", "max_input_bytes", "credential_env", "credential_file")


class ProjectForm(forms.ModelForm[Project]):
    """Every setting says what it does; the webhook secret is typed like a password and never
    shown again (left empty, the current one is kept)."""

    webhook_url = forms.URLField(assume_scheme="https", required=False, max_length=200,
                                 help_text=Project._meta.get_field("webhook_url").help_text)

    class Meta:
        model = Project
        fields = "__all__"  # noqa: DJ007 - the admin shows every field, as it did before
        widgets = {"webhook_secret": forms.PasswordInput(render_value=False)}
        help_texts = {
            "slug": "The project's short name in URLs, tokens' listings and exports.",
            "max_attempts": "The largest repair budget a contract may ask for: attempts before "
                            "the contract is exhausted (1–10).",
            "max_checks": "The most checks one contract may declare (1–100).",
            "max_file_bytes": "The most bytes a file check reads from a workspace file.",
            "review_mode": "required: every contract waits for a person twice (its intent, "
                           "then its evidence plan) before it is active. off: contracts are "
                           "active at once and labelled unreviewed everywhere.",
            "authoring_mode": "Who writes claims and checks: current-agent or manual (declared "
                              "by the caller, not verified), or auxiliary-model (drafted by "
                              "this project's draft route, and the contract must match the "
                              "draft exactly).",
            "review_ttl_seconds": "How long a proposal waits for a decision (60 s to 30 days); "
                                  "then it expires and approves nothing.",
            "required_approvals": "Distinct reviewers who must approve the same receipt before "
                                  "a stage passes (1–10); one rejection or revision request "
                                  "ends the stage. The agent's token owner never counts.",
            "webhook_secret": "HMAC-SHA256 key for the webhook signature. Leave empty to keep "
                              "the current secret.",
        }

    def clean_webhook_secret(self) -> str:
        typed = str(self.cleaned_data.get("webhook_secret") or "")
        return typed or (self.instance.webhook_secret if self.instance.pk else "")


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin[Project]):
    form = ProjectForm
    list_display = ("slug", "name", "review_mode", "authoring", "max_attempts",
                    "required_approvals")
    search_fields = ("slug", "name")
    inlines = [MembershipInline, DraftRouteInline]
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}

    @admin.display(description="authoring", ordering="authoring_mode")
    def authoring(self, obj: Project) -> str:
        if obj.authoring_mode == AuthoringMode.AUXILIARY_MODEL:
            return "auxiliary-model (drafted by the project's route)"
        return f"{obj.authoring_mode} (caller-declared)"


class ReadOnlyAdmin(admin.ModelAdmin[Any]):
    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(AgentToken)
class AgentTokenAdmin(admin.ModelAdmin[AgentToken]):
    list_display = ("name", "kind", "prefix", "project", "created_at", "last_used_at",
                    "revoked_at")
    list_filter = ("project", "kind")
    fields = ("project", "name", "kind", "owner", "prefix", "created_at", "last_used_at",
              "revoked_at")
    readonly_fields = ("prefix", "created_at", "last_used_at", "revoked_at")
    actions = ["revoke"]

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest,
                                 **kwargs: Any) -> Any:
        if db_field.name == "owner":  # every token has an owner (the model keeps old ones)
            kwargs["required"] = True
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def formfield_for_choice_field(self, db_field: Any, request: HttpRequest,
                                   **kwargs: Any) -> Any:
        field = super().formfield_for_choice_field(db_field, request, **kwargs)
        if db_field.name == "kind" and field is not None:  # left out: an agent token
            field.required = False
        return field

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> tuple[str, ...]:
        # A token's project is fixed at creation: moving it would hand its agent another project.
        return (*self.readonly_fields, *(("project", "kind") if obj is not None else ()))

    def save_model(self, request: HttpRequest, obj: AgentToken, form: Any, change: bool) -> None:
        if change:
            obj.save(update_fields=["name", "owner"])
            return
        token, secret = token_create(project=obj.project, name=obj.name, owner=obj.owner,
                                     kind=obj.kind or TokenKind.AGENT)
        obj.pk, obj.prefix, obj.digest = token.pk, token.prefix, token.digest
        cast(Any, obj).new_secret = secret  # for response_add, on this request only

    def response_add(self, request: HttpRequest, obj: AgentToken,
                     post_url_continue: str | None = None) -> HttpResponse:
        """The secret is shown once, in the answer to the POST that created it: never through
        the messages framework (its cookie would carry it) nor the session."""
        return TemplateResponse(request, "admin/governor/agenttoken/created.html", {
            **self.admin_site.each_context(request), "opts": self.opts, "token": obj,
            "secret": cast(Any, obj).new_secret, "title": "New agent token",
        })

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[AgentToken]) -> None:
        for token in queryset:
            token_revoke(token=token)
        messages.success(request, f"Revoked {queryset.count()} token(s).")


@admin.register(Session)
class SessionAdmin(ReadOnlyAdmin):
    list_display = ("id", "project", "external_id", "workspace_path", "imported", "created_at",
                    "events_link")
    list_filter = ("project", "imported")
    search_fields = ("id", "external_id")

    @admin.display(description="events")
    def events_link(self, obj: Session) -> str:
        url = reverse("admin:governor_event_changelist") + f"?session__id__exact={obj.pk}"
        return format_html('<a href="{}">log</a> · <a href="/sessions/{}/">timeline</a>',
                           url, obj.pk)


@admin.register(Event)
class EventAdmin(ReadOnlyAdmin):
    list_display = ("session", "seq", "type", "origin", "time", "short_hash")
    list_filter = ("origin", "type")
    list_select_related = ("session",)
    ordering = ("session", "seq")
    show_full_result_count = False

    @admin.display(description="hash")
    def short_hash(self, obj: Event) -> str:
        return obj.hash[:16] + "…"


@admin.register(SigningKey)
class SigningKeyAdmin(ReadOnlyAdmin):
    list_display = ("keyid", "active", "created_at", "retired_at")
    exclude = ("private_key",)
