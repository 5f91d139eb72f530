"""Errors raised by services. The API maps each class to one HTTP status in one place."""

from __future__ import annotations

from typing import Any

from django.http import Http404


class ServiceError(Exception):
    code = "error"

    def __init__(self, message: str, *, details: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class NotFound(ServiceError, Http404):
    """Also an `Http404`, so a page that lets it through answers 404."""

    code = "NOT_FOUND"


class Conflict(ServiceError):
    code = "CONFLICT"


class Invalid(ServiceError):
    """Bad input: `details` lists {"path", "message"} for every failing field."""

    code = "VALIDATION"


class ReviewRequired(Invalid):
    """A proposal only a person's review could accept, in a project whose review is off
    (rules §17.7): `details` names each refused claim as {"path", "message"}."""

    code = "review-required"


class Forbidden(ServiceError):
    """The token is valid but of a kind this route does not take (403)."""

    code = "FORBIDDEN"


class Unavailable(ServiceError):
    code = "UNAVAILABLE"


class RetryLater(ServiceError):
    """Refused for now (429): the same request may succeed after `retry_after` seconds."""

    def __init__(self, message: str, *, retry_after: int, details: Any = None) -> None:
        super().__init__(message, details=details)
        self.retry_after = retry_after


class TooManyWaits(RetryLater):
    """Every wait slot of the token is held; one frees within `retry_after` seconds."""

    code = "TOO_MANY_WAITS"


class TooManyImports(RetryLater):
    """The token started GOVERNOR_MAX_IMPORTS_PER_MINUTE imports within the last minute."""

    code = "TOO_MANY_IMPORTS"


class TooLarge(ServiceError):
    """A body or an item over a size cap (413)."""

    code = "TOO_LARGE"
