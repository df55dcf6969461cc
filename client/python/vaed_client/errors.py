"""Exceptions raised by vaed_client.

Every failed call raises a subclass of :class:`VaedError` carrying the
daemon's (or the client library's) message, which names the field and the
rule it broke, and the status code name of vaed's wire protocol
(``vaed.v1.ErrorCode`` in lower_snake form, e.g. ``"invalid_argument"``).

=====================  ==================================================
exception              raised when
=====================  ==================================================
ValidationError        a request field broke a rule (``invalid_argument``,
                       ``out_of_range``, ``failed_precondition``); also a
                       ``ValueError``
NotFound               unknown model, region or client (``not_found``);
                       a ``ValidationError`` and a ``LookupError``
Quarantined            the daemon quarantined this process after client
                       faults; ``retry_after`` seconds until it may retry
Busy                   the daemon is at capacity; ``retry_after`` seconds
DaemonUnavailable      no daemon at the socket, no answer in time, or it
                       could not be reached again within
                       ``reconnect_timeout``; also a ``ConnectionError``
ResourceExhausted      the decode would exceed the daemon's memory budget
                       or a quota, or the client library ran out of memory
                       (``resource_exhausted``); a ``MemoryError``
DeadlineExceeded       the request's deadline passed; a ``TimeoutError``
PermissionDenied       the daemon does not admit this process or the
                       operation needs an admin; a ``PermissionError``
ClientFault            the daemon faulted reading or writing this
                       client's memory (e.g. a truncated segment)
VersionMismatch        client and daemon speak different protocol versions
VaedError              anything else (``internal``, ``cancelled``, ...)
=====================  ==================================================
"""

from __future__ import annotations

from typing import Optional

__all__ = [
    "VaedError",
    "ValidationError",
    "NotFound",
    "Quarantined",
    "Busy",
    "DaemonUnavailable",
    "ResourceExhausted",
    "DeadlineExceeded",
    "PermissionDenied",
    "ClientFault",
    "VersionMismatch",
    "from_status",
]


class VaedError(Exception):
    """Base class: ``code`` (protocol status code, int), ``code_name``
    (e.g. ``"invalid_argument"``), ``message`` (the daemon's text),
    ``retry_after`` (seconds, float, or None when the daemon did not say),
    and for a decode that streamed its output (:meth:`Client.decode_stream`)
    ``final_frames`` / ``final_samples``: the video output's pixel frames
    ``[0, final_frames)`` and the audio output's samples per channel
    ``[0, final_samples)`` were final before the failure and stay valid
    (``vaed.v1.Error.final_frames`` / ``final_samples``); 0 = none, and
    always 0 for other calls."""

    def __init__(self, message: str, *, code: int = 11, code_name: str = "internal",
                 retry_after: Optional[float] = None, final_frames: int = 0,
                 final_samples: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.code_name = code_name
        self.retry_after = retry_after
        self.final_frames = final_frames
        self.final_samples = final_samples

    def __str__(self) -> str:
        text = f"{self.code_name}: {self.message}"
        if self.retry_after is not None and "retry after" not in self.message:
            text += f" (retry after {self.retry_after:.3f} s)"
        return text


class ValidationError(VaedError, ValueError):
    """A request field broke a rule; the message names the field and the rule."""


class NotFound(ValidationError, LookupError):
    """Unknown model, region or client."""


class Quarantined(VaedError):
    """This process is quarantined after faulting too often; every request
    is refused until ``retry_after`` seconds pass or an operator runs
    ``vaectl quarantine release``."""


class Busy(VaedError):
    """The daemon is at capacity (queue or in-flight limit); nothing was
    started. Retry after ``retry_after`` seconds."""


class DaemonUnavailable(VaedError, ConnectionError):
    """No daemon at the socket, no reply within the timeout, or the daemon
    could not be reached again within ``reconnect_timeout``."""


class ResourceExhausted(VaedError, MemoryError):
    """Over a quota or the daemon's memory budget, or out of memory (in the
    daemon or in the client library)."""


class DeadlineExceeded(VaedError, TimeoutError):
    """The request's ``deadline`` passed (queue time included)."""


class PermissionDenied(VaedError, PermissionError):
    """The daemon does not admit this process, or the call needs an admin."""


class ClientFault(VaedError):
    """The daemon faulted reading or writing this client's memory."""


class VersionMismatch(VaedError):
    """Client library and daemon speak different protocol versions."""


# vaed::StatusCode values (shm/protocol/include/vaed/status.h); never renumbered.
_CLASS_BY_CODE = {
    1: ValidationError,     # invalid_argument
    2: NotFound,            # not_found
    4: ValidationError,     # out_of_range
    5: ValidationError,     # failed_precondition
    6: ResourceExhausted,   # resource_exhausted
    7: DaemonUnavailable,   # unavailable
    8: VersionMismatch,     # version_mismatch
    10: ClientFault,        # client_fault
    13: DeadlineExceeded,   # deadline_exceeded
    15: Quarantined,        # quarantined
    16: Busy,               # busy
    17: PermissionDenied,   # permission_denied
}


def from_status(code: int, code_name: str, message: str, retry_after_ms: int = 0,
                final_frames: int = 0, final_samples: int = 0) -> VaedError:
    """The exception for a failed vaed Status (used by the extension
    module). ``retry_after_ms`` 0 means "not said" (``retry_after`` None);
    ``final_frames`` / ``final_samples``: the Status's streamed-output
    extent (pixel frames, samples per channel; 0 = none)."""
    cls = _CLASS_BY_CODE.get(code, VaedError)
    retry_after = retry_after_ms / 1000.0 if retry_after_ms else None
    return cls(message, code=code, code_name=code_name, retry_after=retry_after,
               final_frames=int(final_frames), final_samples=int(final_samples))
