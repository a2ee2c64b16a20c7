"""RecvTensor's bytes over a plain TCP socket between flowgraph workers (issue 12, D1).

grpcio moves a large tensor at 600-970 MB/s on loopback (every chunk is a `bytes` that grpcio
makes and copies); a socket written from the array's own buffer (sendall of a memoryview) and
read into the preallocated result (recv_into) moves ~2400 MB/s. So a tensor of at least
MIN_BYTES between two flowgraph workers takes a socket, negotiated inside RecvTensor the way
TensorFlow's RDMA transports negotiate theirs, so that a TensorFlow peer never sees it:

  1. the receiver's streamed RecvTensor (grpc_worker.STREAM_RECV_PATH, flowgraph's own RPC)
     carries `transport_options` = Any(RawTensorTransport{}): an offer;
  2. a sender with a listener (each GrpcServer has one, bound to the host of its own gRPC
     address and nothing else) answers message 0, the header (dtype, shape), with
     `transport_options` = Any(RawTensorTransport{port, token}) and sends no chunks. Its RPC
     stays open until the transfer ends: a receiver that cancels the RPC drops the transfer,
     and a transfer that no receiver starts within IDLE_TIMEOUT_S fails the RPC;
  3. the receiver connects to `port` on the sender's host (idle connections are kept per
     peer), writes b"T" and the 16-byte token, reads an 8-byte little-endian length, then
     exactly that many bytes into the array the header describes.

Once a receiver knows a peer's port (its GetStatus answer names it, in flowgraph's field
GetStatusResponse.raw_port, and so does every answer to an offer, with an empty token when the
bytes follow in the stream), it asks for each later tensor of that peer on a socket too,
whatever its size: a frame b"R" + length + RecvTensorRequest, answered when the step has made
the tensor with the header's length and the header, then the length and bytes as above (or a
failure: `error_payload`). A gRPC call costs ~0.5-1 ms of CPU on each side, a socket round trip
a tenth of that, and a ps serving many workers spends most of its time there. A port that cannot
be connected to (the peer restarted on another one) sends the receiver back to gRPC, which
learns the new one. A master runs its steps' graphs on such peers by socket too (RunGraph,
raw_calls.py).

No thread waits for a tensor: the sender's handler awaits the transfer on the I/O loop
(io_loop.py), whose selector also watches every idle connection for its next frame and every
receiver's connection for its answer; a pool thread runs only while bytes flow (reading a frame,
writing or reading an answer). Senders and receivers have separate pools, so a transfer's two
ends never wait for each other's threads.

Failures are errors of the step, never of the process: a length other than the header's is
DataLossError; a connection that closes early (the peer died or gave up) is UnavailableError
naming the peer; no progress for IDLE_TIMEOUT_S is DeadlineExceededError; a token the sender
no longer knows (its RPC ended) is AbortedError. Cancelling the receive (its CallOptions, as
the receiving step's rendezvous does when the step ends) shuts its socket down at once.

This module holds the protocol's constants, the negotiation and the framing that both ends
use; raw_sender.py (RawSender) and raw_receiver.py (RawReceiver) are the two ends.
"""

from __future__ import annotations

import socket
import struct

from google.protobuf.message import DecodeError

from flowgraph.core import errors
from flowgraph.core.protos import worker_pb2
from flowgraph.core.protos.worker_pb2 import RawTensorTransport

MIN_BYTES = 512 << 10  # below this, gRPC's chunks cost less than a socket round trip more
IDLE_TIMEOUT_S = 60.0
TOKEN_BYTES = 16
IDLE_KEPT = 4  # idle connections a receiver keeps per peer
LENGTH = struct.Struct("<Q")
UNKNOWN_TOKEN = (1 << 64) - 1  # the length a sender answers a token it does not know with
ERROR_BIT = 1 << 63  # set in the first word of a failed RecvTensor asked on the socket
_ERROR_HEAD = struct.Struct("<iH")  # a failure's code and the length of its node's name


# -- negotiation -----------------------------------------------------------------------------
def offer(request) -> None:
    """Offers the raw transport in a RecvTensorRequest proto."""
    request.transport_options.Pack(RawTensorTransport())


def offered(request) -> bool:
    return request.HasField("transport_options") and request.transport_options.Is(
        RawTensorTransport.DESCRIPTOR
    )


def accepted(header) -> RawTensorTransport | None:
    """The transfer a RecvTensorResponse header names; None if its bytes follow in the stream."""
    if not header.HasField("transport_options"):
        return None
    options = RawTensorTransport()
    if not header.transport_options.Unpack(options):
        return None
    return options


# -- the wire -----------------------------------------------------------------------------
class Closed(Exception):
    """The sender closed the connection before it answered."""


def send_bytes(conn: socket.socket, data: memoryview) -> None:
    """Step 3, sender's side: the length, then the bytes straight from the array's buffer."""
    conn.sendall(LENGTH.pack(len(data)))
    conn.sendall(data)


def read_into(conn: socket.socket, view: memoryview) -> int:
    """Reads until `view` is full or the peer closes; the number of bytes read."""
    got = 0
    while got < len(view):
        n = conn.recv_into(view[got:])
        if n == 0:
            break
        got += n
    return got


def read_exactly(conn: socket.socket, n: int) -> bytes:
    """`n` bytes from `conn`; Closed if it closes first."""
    buffer = bytearray(n)
    if read_into(conn, memoryview(buffer)) < n:
        raise Closed
    return bytes(buffer)


def error_payload(error: BaseException, what: str) -> bytes:
    """A failure as an answer's payload: its code, the node it names (so the client points at
    the line that made it, as over gRPC: rpc_errors.py) and its message; an exception that is
    not an OpError is InternalError naming `what` (the request that failed)."""
    if not isinstance(error, errors.OpError):
        error = errors.InternalError(None, None, f"{what} failed: {type(error).__name__}: {error}")
    node = (getattr(error, "node_name", None) or "").encode()
    message = (error.message or f"{what} failed").encode()
    return _ERROR_HEAD.pack(error.error_code, len(node)) + node + message


def error_answer(error: BaseException, what: str) -> bytes:
    """A failure's whole answer: its payload's length with ERROR_BIT set, then the payload."""
    payload = error_payload(error, what)
    return LENGTH.pack(ERROR_BIT | len(payload)) + payload


def parse_error(payload: bytes) -> errors.OpError:
    """The OpError of an `error_payload`."""
    code, node_length = _ERROR_HEAD.unpack_from(payload)
    start = _ERROR_HEAD.size
    node = payload[start : start + node_length].decode(errors="replace")
    message = payload[start + node_length :].decode(errors="replace")
    error = errors.exception_type_from_error_code(code)(None, None, message)
    if node:
        error.node_name = node
    return error


def parse_request(data: bytes):
    try:
        request = worker_pb2.RecvTensorRequest.FromString(data)
    except DecodeError as e:
        raise errors.InvalidArgumentError(
            None, None, f"RecvTensor: malformed RecvTensorRequest: {e}"
        ) from None
    return request


def shutdown(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # not connected (any more)
