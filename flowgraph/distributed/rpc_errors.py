"""OpError <-> gRPC status: TF's error codes are gRPC's status codes (core/errors.py), so an
error crosses the wire as (code, message) and the client raises the same class again.

The message keeps what the server said (the node, its device, the task); the node's name also
travels in trailing metadata so that the client Session can point at the line that created it,
as a local run does. Errors made on the client side (the peer cannot be reached, the deadline
passed) name the task and the RPC, so a failed step says which task died. A call whose
connection broke under it is UnavailableError however gRPC words it: gRPC reports a peer that
dies mid-call as UNAVAILABLE ("Socket closed") or, depending on when the connection's end
reaches the call, as UNKNOWN "Stream removed", which TensorFlow's FromGrpcStatus maps to
UNAVAILABLE too.
"""

from __future__ import annotations

import grpc

from flowgraph.core import errors

_STATUS_BY_CODE = {status.value[0]: status for status in grpc.StatusCode}
NODE_NAME_KEY = "fg-node-name"  # trailing metadata: the node an OpError names, if any
ORIGIN_KEY = "fg-origin"  # trailing metadata on every status a flowgraph server sets


def status_code(code: int) -> grpc.StatusCode:
    """The grpc.StatusCode for a TF error code (UNKNOWN for codes gRPC does not define)."""
    return _STATUS_BY_CODE.get(code, grpc.StatusCode.UNKNOWN)


def status(error: BaseException, method: str) -> tuple[grpc.StatusCode, str, tuple]:
    """(code, details, trailing metadata) of the status that ends a failed call of `method`."""
    metadata = [(ORIGIN_KEY, "server")]
    if isinstance(error, errors.OpError):
        node_name = getattr(error, "node_name", None)
        if node_name:
            metadata.append((NODE_NAME_KEY, node_name))
        code, message = error.error_code, error.message
    else:  # a bug on the server: report it to the caller, never crash the server
        code = errors.INTERNAL
        message = f"{method} failed: {type(error).__name__}: {error}"
    return status_code(code), message or f"{method} failed", tuple(metadata)


def from_rpc_error(error: grpc.RpcError, method: str, peer: str) -> errors.OpError:
    """The OpError for a failed call of `method` to `peer` (a task name or an address)."""
    code = error.code().value[0] if error.code() is not None else errors.UNKNOWN
    metadata = dict(error.trailing_metadata() or ())
    details = error.details() or ""
    if (
        code == errors.UNKNOWN
        and details.startswith("Stream removed")
        and ORIGIN_KEY not in metadata
    ):
        code = errors.UNAVAILABLE  # the connection broke: the peer died or went away
    if metadata.get(ORIGIN_KEY) == "server":
        message = details
    elif code == errors.DEADLINE_EXCEEDED:
        message = f"{method} to {peer} passed its deadline"
    else:  # gRPC itself failed the call: the peer is down, went away or never answered
        message = f"{method} to {peer} failed: {details}"
    err = errors.exception_type_from_error_code(code)(None, None, message)
    if NODE_NAME_KEY in metadata:
        err.node_name = metadata[NODE_NAME_KEY]
    return err
