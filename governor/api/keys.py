from __future__ import annotations

from django.http import HttpRequest
from ninja import Router

from governor.api.auth import agent_token
from governor.api.errors import ERROR_RESPONSES
from governor.api.schemas import KeysOut, ReceiptOut
from governor.selectors import keys as published
from governor.selectors.receipts import receipt_lookup
from governor.services import keys

router = Router(tags=["keys and receipts"])


@router.get("/keys", response=KeysOut, auth=None)
def public_keys(request: HttpRequest) -> dict[str, object]:
    keys.key_active()
    return {"keys": published.public_keys()}


@router.get("/receipts/{receipt}", response={200: ReceiptOut, **ERROR_RESPONSES})
def receipt(request: HttpRequest, receipt: str) -> dict[str, object]:
    """The record a receipt names, in the caller's project."""
    return receipt_lookup(project=agent_token(request).project, receipt=receipt)
