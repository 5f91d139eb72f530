from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router

from governor.api.schemas import KeysOut
from governor.services import keys

router = Router(tags=["keys"])


@router.get("/keys", response=KeysOut, auth=None)
def public_keys(request: HttpRequest) -> dict[str, Any]:
    keys.key_active()
    return {"keys": keys.public_keys()}
