from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class ReaderBaseState(_message.Message):
    __slots__ = ("work_started", "work_finished", "num_records_produced", "current_work", "position")
    WORK_STARTED_FIELD_NUMBER: _ClassVar[int]
    WORK_FINISHED_FIELD_NUMBER: _ClassVar[int]
    NUM_RECORDS_PRODUCED_FIELD_NUMBER: _ClassVar[int]
    CURRENT_WORK_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    work_started: int
    work_finished: int
    num_records_produced: int
    current_work: bytes
    position: int
    def __init__(self, work_started: _Optional[int] = ..., work_finished: _Optional[int] = ..., num_records_produced: _Optional[int] = ..., current_work: _Optional[bytes] = ..., position: _Optional[int] = ...) -> None: ...
