from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class InterconnectLink(_message.Message):
    __slots__ = ("device_id", "type", "strength")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    STRENGTH_FIELD_NUMBER: _ClassVar[int]
    device_id: int
    type: str
    strength: int
    def __init__(self, device_id: _Optional[int] = ..., type: _Optional[str] = ..., strength: _Optional[int] = ...) -> None: ...

class LocalLinks(_message.Message):
    __slots__ = ("link",)
    LINK_FIELD_NUMBER: _ClassVar[int]
    link: _containers.RepeatedCompositeFieldContainer[InterconnectLink]
    def __init__(self, link: _Optional[_Iterable[_Union[InterconnectLink, _Mapping]]] = ...) -> None: ...

class DeviceLocality(_message.Message):
    __slots__ = ("bus_id", "numa_node", "links")
    BUS_ID_FIELD_NUMBER: _ClassVar[int]
    NUMA_NODE_FIELD_NUMBER: _ClassVar[int]
    LINKS_FIELD_NUMBER: _ClassVar[int]
    bus_id: int
    numa_node: int
    links: LocalLinks
    def __init__(self, bus_id: _Optional[int] = ..., numa_node: _Optional[int] = ..., links: _Optional[_Union[LocalLinks, _Mapping]] = ...) -> None: ...

class DeviceAttributes(_message.Message):
    __slots__ = ("name", "device_type", "memory_limit", "locality", "incarnation", "physical_device_desc")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DEVICE_TYPE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_LIMIT_FIELD_NUMBER: _ClassVar[int]
    LOCALITY_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    PHYSICAL_DEVICE_DESC_FIELD_NUMBER: _ClassVar[int]
    name: str
    device_type: str
    memory_limit: int
    locality: DeviceLocality
    incarnation: int
    physical_device_desc: str
    def __init__(self, name: _Optional[str] = ..., device_type: _Optional[str] = ..., memory_limit: _Optional[int] = ..., locality: _Optional[_Union[DeviceLocality, _Mapping]] = ..., incarnation: _Optional[int] = ..., physical_device_desc: _Optional[str] = ...) -> None: ...
