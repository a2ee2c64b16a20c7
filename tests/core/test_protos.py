"""Wire compatibility of our protos with TensorFlow's: files written by real TF parse losslessly,
and every field number matches the dump of TF 2.21's live descriptors (FORMATS.md §1.4)."""

import importlib.util
import re
import struct
from pathlib import Path

import pytest
from google.protobuf import descriptor, descriptor_pool, message, text_format, unknown_fields

from flowgraph.core import protos
from tests.helpers import TF_FIXTURES

ROOT = Path(__file__).resolve().parents[2]
GRAPHS = sorted((TF_FIXTURES / "graphs").glob("*.pb"))


def fixture(relative: str) -> Path:
    path = TF_FIXTURES / relative
    if not path.exists():
        pytest.skip(f"TensorFlow fixture {path} is absent")
    return path


def assert_no_unknown_fields(msg: message.Message, where: str = "") -> None:
    """Fails if msg or any message nested in it kept fields our .proto files do not declare."""
    where = where or msg.DESCRIPTOR.name
    assert len(unknown_fields.UnknownFieldSet(msg)) == 0, f"unknown fields in {where}"
    for field, value in msg.ListFields():
        if field.type != descriptor.FieldDescriptor.TYPE_MESSAGE:
            continue
        if field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            if value_field.type != descriptor.FieldDescriptor.TYPE_MESSAGE:
                continue
            items = value.items()
        else:
            items = enumerate(value) if field.is_repeated else [("", value)]
        for key, item in items:
            assert_no_unknown_fields(item, f"{where}.{field.name}[{key!r}]")


def parse_lossless(cls: type[message.Message], data: bytes, exact: bool = True) -> message.Message:
    """Parses data and checks that nothing was unknown and that re-serializing loses nothing.

    With exact, deterministic re-serialization must give back the very same bytes, which holds
    for the fixture files. Payloads nested in events were serialized without the deterministic
    flag, so their map entries are in arbitrary order and only the parsed message must survive.
    """
    msg = cls.FromString(data)
    assert_no_unknown_fields(msg)
    if exact:
        assert msg.SerializeToString(deterministic=True) == data
    else:
        assert cls.FromString(msg.SerializeToString()) == msg
    return msg


@pytest.mark.parametrize("path", GRAPHS, ids=[p.name for p in GRAPHS])
def test_tensorflow_graphdefs_parse_losslessly(path: Path) -> None:
    graph = parse_lossless(protos.GraphDef, path.read_bytes())
    assert graph.node and graph.versions.producer > 0


def test_tensorflow_run_metadata_parses_losslessly() -> None:
    data = fixture("timeline_run_metadata.pb").read_bytes()
    run_metadata = parse_lossless(protos.RunMetadata, data)
    node_stats = [n for dev in run_metadata.step_stats.dev_stats for n in dev.node_stats]
    assert node_stats and all(n.all_start_micros > 0 for n in node_stats)


def test_tensorflow_meta_graph_parses_losslessly() -> None:
    data = fixture("checkpoints/model.ckpt-7.meta").read_bytes()
    meta_graph = parse_lossless(protos.MetaGraphDef, data)
    assert meta_graph.saver_def.version == protos.SaverDef.V2
    assert meta_graph.saver_def.restore_op_name == "save/restore_all"
    assert "variables" in meta_graph.collection_def
    assert meta_graph.meta_info_def.stripped_op_list.op


def test_tensorflow_checkpoint_state_parses_as_text() -> None:
    text = fixture("checkpoints/checkpoint").read_text()
    state = text_format.Parse(text, protos.CheckpointState())
    assert state.model_checkpoint_path == "model.ckpt-7"
    assert list(state.all_model_checkpoint_paths) == ["model.ckpt-7"]


def tfrecords(data: bytes) -> list[bytes]:
    """Slices TFRecord framing (FORMATS.md §1.1): u64 length, u32 crc, data, u32 crc."""
    records, offset = [], 0
    while offset < len(data):
        (length,) = struct.unpack_from("<Q", data, offset)
        records.append(data[offset + 12 : offset + 12 + length])
        offset += 12 + length + 4
    assert offset == len(data), "truncated record"
    return records


def test_tensorflow_event_file_parses_losslessly() -> None:
    data = fixture("events/events.out.tfevents.1700000000.fixture").read_bytes()
    events = [parse_lossless(protos.Event, record) for record in tfrecords(data)]
    assert events[0].file_version == "brain.Event:2"
    # Payloads stored as bytes inside events are themselves TF protos.
    nested = {"graph_def": protos.GraphDef, "meta_graph_def": protos.MetaGraphDef}
    kinds = {event.WhichOneof("what") for event in events}
    assert {"summary", "tagged_run_metadata", *nested} <= kinds
    for event in events:
        kind = event.WhichOneof("what")
        if kind in nested:
            parse_lossless(nested[kind], getattr(event, kind), exact=False)
        elif kind == "tagged_run_metadata":
            run_metadata = event.tagged_run_metadata.run_metadata
            parse_lossless(protos.RunMetadata, run_metadata, exact=False)


def parse_field_dump(text: str) -> tuple[dict[str, dict[str, str]], set[str]]:
    """Parses field_numbers.txt into {type full name: {member: description}} and the names in
    its section 1. A member line reads `name = 3 (int64, repeated, packed)` (a field) or
    `NAME = 3` (an enum value); nested types are indented under their parent."""
    types: dict[str, dict[str, str]] = {}
    section1: set[str] = set()
    parents: dict[int, str] = {}
    section = 0
    for line in text.splitlines():
        if line.startswith("####"):
            section += 1
            continue
        if not line.strip() or line.startswith("#"):
            continue
        indent = len(line) - len(line.lstrip())
        header = re.match(r"(message|enum) ([A-Za-z_][\w.]*)(\s+\(file .*\))?$", line.strip())
        if header:
            name = header.group(2)
            parents[indent] = name
            types[name] = {}
            if section == 1:
                section1.add(name)
        else:
            member, description = line.strip().split(" = ", 1)
            types[parents[indent - 2]][member] = description
    return types, section1


SCALAR_TYPES = {
    getattr(descriptor.FieldDescriptor, name): name[len("TYPE_") :].lower()
    for name in dir(descriptor.FieldDescriptor)
    if name.startswith("TYPE_")
}


def type_name(field: descriptor.FieldDescriptor) -> str:
    """Renders a field's type as the dump does, with our package renamed to TF's."""
    if field.type == descriptor.FieldDescriptor.TYPE_MESSAGE:
        rendered = f"message {field.message_type.full_name}"
    elif field.type == descriptor.FieldDescriptor.TYPE_ENUM:
        rendered = f"enum {field.enum_type.full_name}"
    else:
        rendered = SCALAR_TYPES[field.type]
    return re.sub(r"\bflowgraph\.", "tensorflow.", rendered)


def describe(field: descriptor.FieldDescriptor) -> str:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        key, value = field.message_type.fields
        parts = [f"map<{type_name(key)}, {type_name(value)}>", "map"]
    else:
        parts = [type_name(field), "repeated" if field.is_repeated else "optional"]
        if field.is_packed:
            parts.append("packed")
        if field.containing_oneof is not None:
            parts.append(f"oneof {field.containing_oneof.name}")
    if field.GetOptions().deprecated:
        parts.append("deprecated")
    return f"{field.number} ({', '.join(parts)})"


FLOWGRAPH_FIELDS = 1000


def our_members(tf_name: str) -> dict[str, str] | None:
    """Our version of TF type tf_name in the dump's format, or None if we do not define it."""
    name = re.sub(r"^tensorflow\.", "flowgraph.", tf_name)
    pool = descriptor_pool.Default()
    try:
        fields = pool.FindMessageTypeByName(name).fields
        # Numbers from 1000 are flowgraph's own options (config.proto says so); TF has none.
        return {f.name: describe(f) for f in fields if f.number < FLOWGRAPH_FIELDS}
    except KeyError:
        pass
    try:
        return {v.name: str(v.number) for v in pool.FindEnumTypeByName(name).values}
    except KeyError:
        return None


OWN_FIELDS = 1000  # flowgraph's own fields (config.proto's cost-model ones) are numbered from here


def test_field_numbers_match_tensorflow() -> None:
    tf_types, section1 = parse_field_dump(fixture("field_numbers.txt").read_text())
    assert "tensorflow.GraphDef" in section1, "field_numbers.txt did not parse"
    missing = sorted(name for name in section1 if our_members(name) is None)
    assert not missing, f"messages TF files use that we do not define: {missing}"
    for name, members in tf_types.items():
        ours = our_members(name)
        if ours is not None:
            ours = {k: v for k, v in ours.items() if int(v.split()[0]) < OWN_FIELDS}
            assert ours == members, name


def test_package_is_flowgraph_not_tensorflow() -> None:
    # A `tensorflow` package would clash with real TF's descriptors in one process (DESIGN.md).
    files = {protos.GraphDef.DESCRIPTOR.file, protos.Event.DESCRIPTOR.file}
    files |= {dep for f in list(files) for dep in f.dependencies}
    assert {f.package for f in files if f.name.startswith("flowgraph/")} == {"flowgraph"}


def test_generated_code_is_current() -> None:
    if importlib.util.find_spec("grpc_tools") is None:
        pytest.skip("grpcio-tools is not installed, so the generated code cannot be checked")
    spec = importlib.util.spec_from_file_location("gen_protos", ROOT / "tools" / "gen_protos.py")
    gen_protos = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen_protos)
    assert gen_protos.stale_files() == [], "run `python tools/gen_protos.py` and commit the result"
