from flowgraph.core.protos import tensor_pb2 as _tensor_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class NamedTensorProto(_message.Message):
    __slots__ = ("name", "tensor")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TENSOR_FIELD_NUMBER: _ClassVar[int]
    name: str
    tensor: _tensor_pb2.TensorProto
    def __init__(self, name: _Optional[str] = ..., tensor: _Optional[_Union[_tensor_pb2.TensorProto, _Mapping]] = ...) -> None: ...
