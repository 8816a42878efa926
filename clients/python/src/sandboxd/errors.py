"""Exceptions of the sandboxd SDK.

Every refusal of the API (a non-2xx answer with the API's error body) becomes
the subclass of :class:`SandboxdError` its ``code`` names; a supervisor that
cannot be reached is :class:`ConnectionFailed`, and an answer that is not the
API's is :class:`ProtocolError`. A payload that fails (non-zero exit, an
uncaught exception) is not an error: it is an :class:`~sandboxd.Execution`
with ``.error`` set. A time-out is :class:`Timeout`, which carries the
execution.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Optional, Type

if TYPE_CHECKING:  # pragma: no cover
    from .models import Execution


class SandboxdError(Exception):
    """Base class of every exception the SDK raises."""

    #: The API's error code (``invalid_argument``, ``not_found``...); None
    #: when the error did not come from the API.
    code: Optional[str] = None

    def __init__(self, message: str, *, status: Optional[int] = None, code: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        #: The HTTP status of the answer, when there was one.
        self.status = status
        if code is not None:
            self.code = code

    def __str__(self) -> str:
        if self.code:
            return f"{self.code}: {self.message}"
        return self.message


class InvalidRequest(SandboxdError):
    """400 (or 405) ``invalid_argument``: the request breaks a rule of the API."""

    code = "invalid_argument"


class Unauthenticated(SandboxdError):
    """401 ``unauthenticated``: missing or wrong API key (TCP listeners only)."""

    code = "unauthenticated"


class Forbidden(SandboxdError):
    """403 ``forbidden``: the caller may not do this, or a path escapes the workspace."""

    code = "forbidden"


class NotFound(SandboxdError):
    """404 ``not_found``: no such session or file (or another caller's)."""

    code = "not_found"


class Conflict(SandboxdError):
    """409 ``conflict``: the session is being deleted or still busy."""

    code = "conflict"


class TooLarge(SandboxdError):
    """413 ``too_large``: the body, code or upload is above a limit."""

    code = "too_large"


class QuotaExceeded(SandboxdError):
    """507 ``quota_exceeded``: the workspace quota (or the disk) is full."""

    code = "quota_exceeded"


class RateLimited(SandboxdError):
    """429 ``limit_exceeded``: no exec slot, or too many sessions; retry later."""

    code = "limit_exceeded"

    def __init__(self, message: str, *, status: Optional[int] = None, code: Optional[str] = None,
                 retry_after: Optional[float] = None) -> None:
        super().__init__(message, status=status, code=code)
        #: Seconds to wait before retrying, from the ``Retry-After`` header.
        self.retry_after = retry_after


class Unavailable(SandboxdError):
    """503 ``unavailable``: the host cannot sandbox right now (the message says the fix)."""

    code = "unavailable"


class InternalError(SandboxdError):
    """500 ``internal``: a bug in the supervisor (see its log)."""

    code = "internal"


class ConnectionFailed(SandboxdError):
    """The supervisor could not be reached (socket missing, refused, TLS failure...)."""


class ProtocolError(SandboxdError):
    """The answer was not the API's (a proxy, a broken stream, bad JSON)."""


class Timeout(SandboxdError):
    """The code ran past its timeout and was killed.

    ``execution`` holds what it produced until then (output, the exception of
    an interrupted kernel exec).
    """

    code = "timeout"

    def __init__(self, message: str, execution: "Execution") -> None:
        super().__init__(message)
        self.execution = execution


_BY_CODE: Dict[str, Type[SandboxdError]] = {
    cls.code: cls  # type: ignore[misc]
    for cls in (InvalidRequest, Unauthenticated, Forbidden, NotFound, Conflict, TooLarge,
                QuotaExceeded, RateLimited, Unavailable, InternalError)
}


def error_for(status: int, code: str, message: str, retry_after: Optional[str] = None) -> SandboxdError:
    """Returns the exception for an API error body (an unknown code: SandboxdError)."""
    cls = _BY_CODE.get(code, SandboxdError)
    if cls is RateLimited:
        return RateLimited(message, status=status, code=code, retry_after=_parse_retry_after(retry_after))
    return cls(message, status=status, code=code)


def _parse_retry_after(value: Optional[str]) -> Optional[float]:
    if value is None:
        return None
    try:
        return float(value.strip())
    except ValueError:
        return None  # an HTTP date: the API never sends one
