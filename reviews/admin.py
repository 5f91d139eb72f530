"""Operators' view of reviewers' passkeys (issue 18): who can sign decisions, with which
devices, and when each was last used. Reviewers add and remove their own on their passkeys page;
here they are read-only."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from reviews.models import Passkey


@admin.register(Passkey)
class PasskeyAdmin(admin.ModelAdmin[Passkey]):
    list_display = ("user", "name", "created_at", "last_used_at", "removed_at", "sign_count")
    list_filter = (("removed_at", admin.EmptyFieldListFilter),)
    search_fields = ("user__username", "name")
    exclude = ("public_key",)

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
