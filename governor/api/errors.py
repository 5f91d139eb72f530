"""The one place that turns errors into HTTP answers: {"error": {"code", "message", "details"?}}."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse
from ninja import NinjaAPI, Schema
from ninja.errors import AuthenticationError, HttpError
from ninja.errors import ValidationError as NinjaValidationError

from governor.domain.canonical import JSONValueError
from governor.domain.drafting import DraftError
from governor.domain.fields import FieldsInvalid
from governor.domain.harness import InvariantError
from governor.domain.lifecycle import LifecycleError
from governor.lib import errors


class ErrorBody(Schema):
    code: str
    message: str
    details: Any = None


class ErrorOut(Schema):
    error: ErrorBody


ERROR_RESPONSES: dict[int, type[Schema]] = {
    code: ErrorOut for code in (400, 401, 403, 404, 409, 413, 422, 503)
}
# Routes that take `?wait=` may also answer 429 TOO_MANY_WAITS, with Retry-After; an import
# 429 TOO_MANY_IMPORTS.
WAIT_RESPONSES: dict[int, type[Schema]] = {**ERROR_RESPONSES, 429: ErrorOut}
IMPORT_RESPONSES = WAIT_RESPONSES

# §9: the provider failed or timed out (502/504), or its answer was not a valid plan (502).
DRAFT_STATUS = {"DRAFT_UPSTREAM": 502, "DRAFT_TIMEOUT": 504, "DRAFT_STREAM": 502,
                "DRAFT_OUTPUT": 502}

STATUS: dict[type[errors.ServiceError], int] = {
    errors.NotFound: 404,
    errors.Forbidden: 403,
    errors.Conflict: 409,
    errors.Invalid: 422,
    errors.TooLarge: 413,
    errors.RetryLater: 429,
    errors.Unavailable: 503,
}


def error_response(
    api: NinjaAPI, request: HttpRequest, status: int, code: str, message: str, details: Any = None
) -> HttpResponse:
    body: dict[str, Any] = {"code": code, "message": message}
    if details is not None:
        body["details"] = details
    return api.create_response(request, {"error": body}, status=status)


def _ninja_path(location: tuple[Any, ...]) -> str:
    """("body", "payload", "workspace", "path") -> "workspace.path": where it came from dropped;
    an array index is joined with "/" as the domain names items ("events/3", "entries/1/path")."""
    parts = list(location)
    if parts and parts[0] in ("body", "query", "path", "header"):
        parts = parts[1:]
    if parts and parts[0] == "payload":
        parts = parts[1:]
    path = ""
    for index, part in enumerate(parts):
        if index == 0:
            path = str(part)
        elif isinstance(part, int) or isinstance(parts[index - 1], int):
            path += f"/{part}"
        else:
            path += f".{part}"
    return path


# pydantic's words for a refused shape, in the words the domain uses for the same refusal.
_MESSAGES = {
    "missing": "required",
    "extra_forbidden": "unknown field",
    "dict_type": "must be a JSON object",
    "model_type": "must be a JSON object",
    "model_attributes_type": "must be a JSON object",
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "bool_type": "must be a boolean",
    "list_type": "must be a list",
}


def _ninja_message(item: dict[str, Any]) -> str:
    limits = item.get("ctx") or {}
    if item.get("type") == "string_too_long":
        return f"at most {limits.get('max_length')} characters"
    if item.get("type") == "string_too_short" and limits.get("min_length") == 1:
        return "must not be empty"
    return _MESSAGES.get(str(item.get("type")), str(item.get("msg")))


def install(api: NinjaAPI) -> None:
    @api.exception_handler(errors.ServiceError)
    def service_error(request: HttpRequest, exc: errors.ServiceError) -> HttpResponse:
        status = next(code for cls, code in STATUS.items() if isinstance(exc, cls))
        response = error_response(api, request, status, exc.code, exc.message, exc.details)
        if isinstance(exc, errors.RetryLater):
            response["Retry-After"] = str(exc.retry_after)
        return response

    @api.exception_handler(InvariantError)
    def invariant(request: HttpRequest, exc: InvariantError) -> HttpResponse:
        details = {"rule": exc.rule, "index": exc.index, "seq": exc.seq, "message": exc.message}
        return error_response(api, request, 422, "INVARIANT", str(exc), details)

    @api.exception_handler(LifecycleError)
    def lifecycle(request: HttpRequest, exc: LifecycleError) -> HttpResponse:
        # Only imports carry governor events: a log no conforming server could have written.
        details = {"rule": "lifecycle", "index": None, "seq": exc.seq, "message": exc.message}
        return error_response(api, request, 422, "INVARIANT", str(exc), details)

    @api.exception_handler(JSONValueError)
    def bad_json(request: HttpRequest, exc: JSONValueError) -> HttpResponse:
        details = [{"path": exc.path, "message": exc.reason}]
        return error_response(api, request, 422, "INVALID_JSON", str(exc), details)

    @api.exception_handler(FieldsInvalid)
    def bad_fields(request: HttpRequest, exc: FieldsInvalid) -> HttpResponse:
        return error_response(api, request, 422, "VALIDATION", str(exc), exc.errors)

    @api.exception_handler(DraftError)
    def draft_refused(request: HttpRequest, exc: DraftError) -> HttpResponse:
        return error_response(api, request, DRAFT_STATUS.get(exc.code, 502), exc.code,
                              exc.message, exc.details())

    @api.exception_handler(NinjaValidationError)
    def validation(request: HttpRequest, exc: NinjaValidationError) -> HttpResponse:
        details = [{"path": _ninja_path(tuple(item.get("loc", ()))),
                     "message": _ninja_message(item)} for item in exc.errors]
        message = "; ".join(f"{item['path'] or 'body'}: {item['message']}" for item in details)
        return error_response(api, request, 422, "VALIDATION", message, details)

    @api.exception_handler(HttpError)
    def http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
        # django-ninja wraps a body its parser refused; answer with what the parser said.
        if isinstance(exc.__cause__, JSONValueError):
            return bad_json(request, exc.__cause__)
        return error_response(api, request, exc.status_code, "BAD_REQUEST", str(exc))

    @api.exception_handler(AuthenticationError)
    def unauthenticated(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
        response = error_response(
            api, request, 401, "UNAUTHENTICATED",
            "a valid agent token is required: Authorization: Bearer <token>",
        )
        response["WWW-Authenticate"] = "Bearer"
        return response

    @api.exception_handler(Http404)
    def not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
        return error_response(api, request, 404, "NOT_FOUND", str(exc) or "not found")

    @api.exception_handler(RequestDataTooBig)
    def too_big(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
        return error_response(api, request, 413, "TOO_LARGE",
                              "request body is larger than this server accepts",
                              [{"path": "", "message": "body over the size cap"}])
