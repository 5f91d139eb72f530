"""Wire shapes shared by the routers."""

from __future__ import annotations

from typing import Any, Literal

from ninja import Schema
from pydantic import ConfigDict, Field


class Strict(Schema):
    model_config = ConfigDict(extra="forbid")


class WorkspaceIn(Strict):
    kind: Literal["path", "snapshot"]
    path: str | None = Field(default=None, max_length=4096)


class SessionCreateIn(Strict):
    external_id: str | None = Field(default=None, min_length=1, max_length=200)
    workspace: WorkspaceIn
    header: dict[str, Any] | None = None


class SessionOut(Schema):
    id: str
    project: str
    external_id: str | None
    workspace: dict[str, Any]
    imported: bool
    next_seq: int
    head: str
    created_at: str


class AppendOut(Schema):
    first_seq: int
    last_seq: int
    head: str


class EventOut(Schema):
    seq: int
    type: str
    time: int
    origin: str
    data: Any
    prev: str
    hash: str
    meta: dict[str, Any] | None = None


class EventPage(Schema):
    events: list[EventOut]
    next_after: int | None


class KeyOut(Schema):
    keyid: str
    algorithm: str
    publicKey: str  # noqa: N815 - wire name
    active: bool


class KeysOut(Schema):
    keys: list[KeyOut]
