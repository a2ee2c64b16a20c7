"""Errors raised by graph construction and execution; codes are gRPC status codes.

    Exception
     └── OpError(node_def, op, message, error_code)
          ├── CancelledError          CANCELLED            a step was cancelled
          ├── UnknownError            UNKNOWN              a kernel raised something unexpected
          ├── InvalidArgumentError    INVALID_ARGUMENT     bad shape, dtype or value (a ValueError)
          ├── DeadlineExceededError   DEADLINE_EXCEEDED    RunOptions.timeout_in_ms passed
          ├── NotFoundError           NOT_FOUND            an op, kernel, device or file missing
          ├── AlreadyExistsError      ALREADY_EXISTS       a registration or resource exists already
          ├── PermissionDeniedError   PERMISSION_DENIED
          ├── ResourceExhaustedError  RESOURCE_EXHAUSTED   out of memory or quota
          ├── FailedPreconditionError FAILED_PRECONDITION  e.g. reading an uninitialized variable
          ├── AbortedError            ABORTED              a step was aborted (a worker restarted)
          ├── OutOfRangeError         OUT_OF_RANGE         a queue or input is exhausted
          ├── UnimplementedError      UNIMPLEMENTED        an op, dtype or argument unsupported
          ├── InternalError           INTERNAL
          ├── UnavailableError        UNAVAILABLE          a task cannot be reached
          ├── DataLossError           DATA_LOSS            a corrupt file or record
          └── UnauthenticatedError    UNAUTHENTICATED

On the wire an error travels as (code, message); `exception_type_from_error_code` rebuilds
the class.
"""

from __future__ import annotations

OK = 0
CANCELLED = 1
UNKNOWN = 2
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
ALREADY_EXISTS = 6
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8
FAILED_PRECONDITION = 9
ABORTED = 10
OUT_OF_RANGE = 11
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14
DATA_LOSS = 15
UNAUTHENTICATED = 16


class OpError(Exception):
    """A failure while building or running a graph; `node_def` and `op` name where, if known."""

    code = UNKNOWN

    def __init__(self, node_def=None, op=None, message: str = "", error_code: int | None = None):
        super().__init__(message)
        self._node_def = node_def
        self._op = op
        self._message = message
        self._error_code = self.code if error_code is None else error_code

    @property
    def message(self) -> str:
        return self._message

    @property
    def op(self):
        return self._op

    @property
    def node_def(self):
        return self._node_def

    @property
    def error_code(self) -> int:
        return self._error_code

    def __str__(self) -> str:
        return self._message

    def __reduce__(self):
        return type(self), (None, None, self._message, self._error_code)


def _error(name: str, code: int, doc: str, *builtins: type) -> type:
    cls = type(name, (OpError, *builtins), {"code": code, "__doc__": doc})

    def __init__(self, node_def=None, op=None, message="", error_code=None):
        OpError.__init__(self, node_def, op, message, code if error_code is None else error_code)

    cls.__init__ = __init__
    return cls


CancelledError = _error("CancelledError", CANCELLED, "The step or operation was cancelled.")
UnknownError = _error("UnknownError", UNKNOWN, "An unexpected error inside a kernel.")
InvalidArgumentError = _error(
    "InvalidArgumentError",
    INVALID_ARGUMENT,
    "An argument has a bad shape, dtype or value.",
    ValueError,
)
DeadlineExceededError = _error(
    "DeadlineExceededError", DEADLINE_EXCEEDED, "A deadline expired first.", TimeoutError
)
NotFoundError = _error(
    "NotFoundError",
    NOT_FOUND,
    "An op type, kernel, device, tensor or file does not exist.",
    LookupError,
)
AlreadyExistsError = _error("AlreadyExistsError", ALREADY_EXISTS, "The entity already exists.")
PermissionDeniedError = _error("PermissionDeniedError", PERMISSION_DENIED, "Not permitted.")
ResourceExhaustedError = _error("ResourceExhaustedError", RESOURCE_EXHAUSTED, "Out of a resource.")
FailedPreconditionError = _error(
    "FailedPreconditionError", FAILED_PRECONDITION, "The system is not in a state to run this."
)
AbortedError = _error("AbortedError", ABORTED, "The operation was aborted (e.g. a task restarted).")
OutOfRangeError = _error("OutOfRangeError", OUT_OF_RANGE, "Iterated past a valid range.")
UnimplementedError = _error(
    "UnimplementedError",
    UNIMPLEMENTED,
    "Not supported: an op, dtype or argument value.",
    NotImplementedError,
)
InternalError = _error("InternalError", INTERNAL, "An internal invariant broke.")
UnavailableError = _error("UnavailableError", UNAVAILABLE, "A task is not reachable right now.")
DataLossError = _error("DataLossError", DATA_LOSS, "Unrecoverable data loss or corruption.")
UnauthenticatedError = _error("UnauthenticatedError", UNAUTHENTICATED, "No valid credentials.")

_BY_CODE = {
    cls.code: cls
    for cls in (
        CancelledError,
        UnknownError,
        InvalidArgumentError,
        DeadlineExceededError,
        NotFoundError,
        AlreadyExistsError,
        PermissionDeniedError,
        ResourceExhaustedError,
        FailedPreconditionError,
        AbortedError,
        OutOfRangeError,
        UnimplementedError,
        InternalError,
        UnavailableError,
        DataLossError,
        UnauthenticatedError,
    )
}


def exception_type_from_error_code(error_code: int) -> type:
    return _BY_CODE.get(error_code, UnknownError)


def error_code_from_exception_type(cls: type) -> int:
    return getattr(cls, "code", UNKNOWN)


class OperatorNotAllowedInGraphError(TypeError):
    """A Python operator that needs a tensor's value (`if t:`, `bool(t)`) was applied to a
    symbolic tensor while building a graph (TF 1.15's errors.OperatorNotAllowedInGraphError; a
    TypeError, so code that catches TypeError keeps working)."""
