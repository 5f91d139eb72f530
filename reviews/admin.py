"""Operators' view of reviewers' passkeys (issue 18): who can sign decisions, with which
devices, and when each was last used. Reviewers add and remove their own on their passkeys page;
here they are read-only."""

from __future__ import annotations

from django.contrib import admin

from governor.admin import ReadOnlyAdmin
from reviews.models import Passkey


@admin.register(Passkey)
class PasskeyAdmin(ReadOnlyAdmin):
    list_display = ("user", "name", "created_at", "last_used_at", "removed_at", "sign_count")
    list_filter = (("removed_at", admin.EmptyFieldListFilter),)
    search_fields = ("user__username", "name")
    exclude = ("public_key",)
