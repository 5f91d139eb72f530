"""Where the governor is and the agent token, from the environment only (never argv, where
other users of the machine could read it)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from governor_client.errors import ConfigurationError

API_PREFIX = "/api/v1"


@dataclass(frozen=True)
class Config:
    url: str  # the server root, e.g. http://127.0.0.1:8000
    token: str

    @property
    def api_url(self) -> str:
        return self.url + API_PREFIX

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Config:
        env = os.environ if env is None else env
        url = env.get("GOVERNOR_URL", "").strip().rstrip("/")
        if not url:
            raise ConfigurationError("GOVERNOR_URL is not set (e.g. http://127.0.0.1:8000)")
        if not url.startswith(("http://", "https://")):
            raise ConfigurationError(f"GOVERNOR_URL must start with http:// or https://: {url!r}")
        url = url.removesuffix(API_PREFIX)
        token = env.get("GOVERNOR_TOKEN", "").strip()
        token_file = env.get("GOVERNOR_TOKEN_FILE", "").strip()
        if not token and token_file:
            try:
                token = Path(token_file).expanduser().read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ConfigurationError(
                    f"GOVERNOR_TOKEN_FILE {token_file!r} cannot be read: {exc.strerror}"
                ) from None
        if not token:
            raise ConfigurationError("set GOVERNOR_TOKEN or GOVERNOR_TOKEN_FILE to an agent token")
        return cls(url=url, token=token)
