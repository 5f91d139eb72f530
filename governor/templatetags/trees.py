"""Template filters for workspace tree ids (SEMANTICS §10.1)."""

from __future__ import annotations

from typing import Any

from django import template

from governor.domain.tree import TREE_ID_PREFIX

register = template.Library()

SHORT_TREE_CHARS = 8


@register.filter
def tree_short(tree_id: Any) -> str:
    """The short form of `gittree:sha256:<hex>`: its first 8 hex digits, as git abbreviates."""
    text = str(tree_id)
    return text.removeprefix(TREE_ID_PREFIX)[:SHORT_TREE_CHARS]


@register.filter
def by_key(mapping: Any, key: Any) -> Any:
    """`mapping[key]`, or None: a template's lookup by a variable key."""
    return mapping.get(key) if isinstance(mapping, dict) else None


@register.filter
def pair(first: Any, second: Any) -> list[Any]:
    """[first, second]: a side-by-side diff row's two sides, to loop over."""
    return [first, second]
