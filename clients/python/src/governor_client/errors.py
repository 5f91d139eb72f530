"""What can go wrong talking to the governor, as exceptions that carry the server's answer."""

from __future__ import annotations

from typing import Any


class GovernorError(Exception):
    """A refusal or failure. `status` is the HTTP status (None when no answer came back), `code`
    the server's error code (`CONFLICT`, `VALIDATION`, `INVARIANT`, …), `details` its details."""

    def __init__(self, status: int | None, code: str, message: str, details: Any = None) -> None:
        super().__init__(f"{code} ({status}): {message}" if status else f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details = details

    def as_dict(self) -> dict[str, Any]:
        error: dict[str, Any] = {"status": self.status, "code": self.code, "message": self.message}
        if self.details is not None:
            error["details"] = self.details
        return {"error": error}


class GovernorUnreachable(GovernorError):
    """No answer: the governor is down, the network failed, or the answer was lost on the way.
    For a call that is not safe to repeat, the server may or may not have acted on it."""

    def __init__(self, message: str) -> None:
        super().__init__(None, "UNREACHABLE", message)


class ReviewPending(GovernorError):
    """Verify or abstain while the contract is still a proposal a person has not approved: no
    contract is active yet, so there is nothing to verify or abstain from. `review_url` is the
    reviewer's page (also in `details`)."""

    def __init__(self, review_url: str, stage: str) -> None:
        super().__init__(409, "REVIEW_PENDING",
                         f"a contract is waiting for review ({stage} stage), so none is active "
                         f"yet and nothing can be verified: a reviewer decides at {review_url}",
                         {"state": "review-pending", "stage": stage, "review_url": review_url})
        self.review_url = review_url
        self.stage = stage


class ConfigurationError(GovernorError):
    """GOVERNOR_URL / GOVERNOR_TOKEN(_FILE) are missing or unreadable."""

    def __init__(self, message: str) -> None:
        super().__init__(None, "CONFIGURATION", message)


class StateUnusable(ConfigurationError):
    """A directory the client keeps its files in cannot be used: the workspace does not exist,
    or its `.governor/` (or the snapshot cache), or a file the client keeps there, is a symlink
    or not what the client made."""
