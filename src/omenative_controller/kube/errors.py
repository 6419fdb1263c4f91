"""The one error type of the kube layer: an API answer that is not a success."""

from __future__ import annotations

from typing import Any

__all__ = ["ApiError"]


class ApiError(Exception):
    """A non-2xx answer (or no answer: status 0) from the API server.

    ``reason`` is the Status ``reason`` (``AlreadyExists``, ``NotFound``, ``Conflict``,
    ``Invalid``, ``Forbidden``, ``Expired``, ...) or, without an answer, ``Timeout`` or
    ``ConnectionError``.
    """

    def __init__(self, status: int, reason: str, message: str = "", body: Any = None) -> None:
        super().__init__(f"{status} {reason}: {message}" if message else f"{status} {reason}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body

    @classmethod
    def from_response(cls, status: int, body: Any, fallback: str = "") -> ApiError:
        """Build from a response status and its (JSON Status or text) body."""
        if isinstance(body, dict) and body.get("kind") == "Status":
            reason = str(body.get("reason") or fallback or _REASONS.get(status, "Error"))
            return cls(status, reason, str(body.get("message") or ""), body)
        text = body if isinstance(body, str) else ""
        return cls(status, fallback or _REASONS.get(status, "Error"), text[:500], body)

    @property
    def not_found(self) -> bool:
        """404."""
        return self.status == 404

    @property
    def conflict(self) -> bool:
        """409 that is not AlreadyExists: a resourceVersion or UID precondition failed."""
        return self.status == 409 and self.reason != "AlreadyExists"

    @property
    def already_exists(self) -> bool:
        """409 AlreadyExists (a create of a name that is taken)."""
        return self.status == 409 and self.reason == "AlreadyExists"

    @property
    def gone(self) -> bool:
        """410: the resourceVersion (or a list continue token) is too old."""
        return self.status == 410

    @property
    def invalid(self) -> bool:
        """422: the object was rejected by validation."""
        return self.status == 422

    @property
    def quota_exceeded(self) -> bool:
        """403 from a ResourceQuota (``exceeded quota``)."""
        return self.status == 403 and "exceeded quota" in self.message

    @property
    def namespace_gone(self) -> bool:
        """The object's namespace does not exist (404 naming ``namespaces``) or is being
        deleted (403 ``NamespaceTerminating``): nothing can be created there any more."""
        details = self.body.get("details") if isinstance(self.body, dict) else None
        details = details if isinstance(details, dict) else {}
        if self.status == 404:
            return details.get("kind") == "namespaces"
        if self.status != 403:
            return False
        causes = details.get("causes") or ()
        return any(isinstance(c, dict) and c.get("reason") == "NamespaceTerminating"
                   for c in causes) or "because it is being terminated" in self.message

    @property
    def retriable(self) -> bool:
        """No answer, throttled or a server-side failure: try again later."""
        return self.status in {0, 429} or self.status >= 500


_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}
