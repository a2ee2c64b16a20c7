"""The MasterService over gRPC (whitepaper §3.3): a servicer forwarding each RPC to a `Master`
(TF's grpc_master_service; the client side is session/remote.py).

ExtendSessionRequest.replace (nodes that supersede ones sent before: an op given a new control
input after a run) is flowgraph's, not a field of TF's master.proto; it travels as the
length-delimited unknown field REPLACE_FIELD of the request, which TF's parsers skip.
"""

from __future__ import annotations

import grpc
from google.protobuf import unknown_fields

from flowgraph.core.protos import GraphDef, master_service_pb2
from flowgraph.distributed import grpc_service
from flowgraph.distributed import messages as m

SERVICE = master_service_pb2.DESCRIPTOR.services_by_name["MasterService"]
SERVICE_NAMES = grpc_service.wire_names(SERVICE)
SERVICE_NAME = SERVICE_NAMES[0]  # tensorflow.MasterService: what TF's runtime calls
METHODS = grpc_service.methods_of(SERVICE)
REPLACE_FIELD = 1001  # ExtendSessionRequest: GraphDef of replaced nodes (flowgraph's)


# -- server side -----------------------------------------------------------------------------
def handlers(master, pool) -> list[grpc.GenericRpcHandler]:
    """The grpcio handler serving `master` (a Master) as the MasterService, on `pool`'s
    threads."""
    unary = {}
    for name in METHODS:
        method = getattr(master, grpc_service.snake_case(name), None)
        if method is not None:
            unary[name] = _forward(method, getattr(m, f"{name}Request"))
    unary["ExtendSession"] = _extend_session(master)
    return [grpc_service.handler(name, METHODS, unary, pool=pool) for name in SERVICE_NAMES]


def _forward(method, request_class):
    def impl(request, context):
        return method(grpc_service.from_wire(request_class, request)).to_proto()

    return impl


def _extend_session(master):
    def impl(request, context):
        req = grpc_service.from_wire(m.ExtendSessionRequest, request)
        req.replace = _replace_of(request)
        return master.extend_session(req).to_proto()

    return impl


def _replace_of(request) -> GraphDef | None:
    for field in unknown_fields.UnknownFieldSet(request):
        if field.field_number == REPLACE_FIELD:
            return GraphDef.FromString(field.data)
    return None


def with_replace(request, replace: GraphDef) -> None:
    """Appends `replace` to `request` as unknown field REPLACE_FIELD (wire type 2)."""
    data = replace.SerializeToString()
    tag = _varint(REPLACE_FIELD << 3 | 2)
    request.MergeFromString(tag + _varint(len(data)) + data)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)
