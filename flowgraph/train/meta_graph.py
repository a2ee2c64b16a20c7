"""MetaGraphs: a GraphDef plus what a program needs to use it again without its code (TF1's
meta_graph.py): the SaverDef, the collections (variables as VariableDefs, train ops and
summaries as node names, numbers and strings as lists), signatures and assets.

`export_meta_graph` / `import_meta_graph` are how "restore a model without its code" works:
import_meta_graph rebuilds the graph, the collections and a Saver from the SaverDef.
"""

from __future__ import annotations

import logging
import os

from google.protobuf import text_format
from google.protobuf.message import DecodeError

from flowgraph.core.protos import MetaGraphDef, OpList, QueueRunnerDef, SaverDef, VariableDef
from flowgraph.core.protos import OpDef as OpDefProto
from flowgraph.core.tensor_bundle import fs, temp_suffix
from flowgraph.framework import default_graph
from flowgraph.framework.graph import GraphKeys
from flowgraph.framework.importer import import_graph_def
from flowgraph.framework.operation import Operation, Tensor
from flowgraph.ops import variables as variables_lib
from flowgraph.platform import version

__all__ = ["export_meta_graph", "import_meta_graph", "read_meta_graph_file"]

log = logging.getLogger(__name__)

VARIABLE_COLLECTIONS = (
    GraphKeys.GLOBAL_VARIABLES,
    GraphKeys.LOCAL_VARIABLES,
    GraphKeys.METRIC_VARIABLES,
    GraphKeys.MODEL_VARIABLES,
    GraphKeys.TRAINABLE_VARIABLES,
    GraphKeys.MOVING_AVERAGE_VARIABLES,
    GraphKeys.CONCATENATED_VARIABLES,
    GraphKeys.TRAINABLE_RESOURCE_VARIABLES,
)


def _variable_from_proto(proto: VariableDef, import_scope=None):
    if proto.is_resource:
        from flowgraph.ops.resource_variables import ResourceVariable

        return ResourceVariable.from_proto(proto, import_scope=import_scope)
    return variables_lib.Variable.from_proto(proto, import_scope=import_scope)


def _saver_from_proto(proto: SaverDef, import_scope=None):
    from flowgraph.train.saver import Saver

    return Saver.from_proto(proto, import_scope=import_scope)


# collection key -> (proto type, to_proto(value, export_scope), from_proto(proto, import_scope));
# the table TF1 fills with ops.register_proto_function.
PROTO_FUNCTIONS: dict = {
    key: (VariableDef, lambda v, export_scope=None: v.to_proto(export_scope), _variable_from_proto)
    for key in VARIABLE_COLLECTIONS
}
PROTO_FUNCTIONS[GraphKeys.SAVERS] = (
    SaverDef,
    lambda s, export_scope=None: s.to_proto(export_scope),
    _saver_from_proto,
)


def _queue_runner_from_proto(proto, import_scope=None):
    from flowgraph.train.queue_runner import QueueRunner

    return QueueRunner.from_proto(proto, import_scope=import_scope)


PROTO_FUNCTIONS[GraphKeys.QUEUE_RUNNERS] = (
    QueueRunnerDef,
    lambda qr, export_scope=None: qr.to_proto(export_scope),
    _queue_runner_from_proto,
)


def register_proto_function(collection_name, proto_type=None, to_proto=None, from_proto=None):
    """How a collection's values are stored in a MetaGraph (TF1's register_proto_function)."""
    PROTO_FUNCTIONS[collection_name] = (proto_type, to_proto, from_proto)


def _strip(name: str, scope: str | None) -> str:
    if scope and name.startswith(scope + "/"):
        return name[len(scope) + 1 :]
    if scope and name.startswith("^" + scope + "/"):
        return "^" + name[len(scope) + 2 :]
    return name


def _prepend(name: str, scope: str | None) -> str:
    if not scope:
        return name
    if name.startswith("^"):
        return f"^{scope}/{name[1:]}"
    return f"{scope}/{name}"


def _kind(value) -> str:
    if isinstance(value, bool):
        return "int64_list"
    if isinstance(value, int):
        return "int64_list"
    if isinstance(value, float):
        return "float_list"
    if isinstance(value, (str, bytes)):
        return "bytes_list"
    if isinstance(value, (Tensor, Operation, variables_lib.Variable)):
        return "node_list"
    raise TypeError(f"cannot store a {type(value).__name__} in a MetaGraph collection")


# Control-flow contexts have no CondContextDef/WhileContextDef form here yet: the graph itself
# imports and runs, but tf.gradients through an imported loop or cond is not available.
_NOT_SERIALIZED = (GraphKeys.COND_CONTEXT, GraphKeys.WHILE_CONTEXT)


def _add_collection(meta: MetaGraphDef, graph, key, export_scope):
    if not isinstance(key, (str, bytes)) or key in _NOT_SERIALIZED:
        log.debug("collection %r is not serialized", key)
        return
    values = graph.get_collection(key)
    if export_scope:
        values = [v for v in values if not hasattr(v, "name") or v.name.startswith(export_scope)]
    if not values:
        return
    col = meta.collection_def[key]
    try:
        if key in PROTO_FUNCTIONS:
            _, to_proto, _ = PROTO_FUNCTIONS[key]
            for v in values:
                proto = to_proto(v, export_scope=export_scope)
                if proto is not None:
                    col.bytes_list.value.append(proto.SerializeToString())
            return
        kind = _kind(values[0])
        if kind == "node_list":
            col.node_list.value.extend(_strip(v.name, export_scope) for v in values)
        elif kind == "bytes_list":
            col.bytes_list.value.extend(v.encode() if isinstance(v, str) else v for v in values)
        else:
            getattr(col, kind).value.extend(values)
    except (TypeError, AttributeError, ValueError) as e:
        log.warning("Issue encountered when serializing: %s.\n%s", key, e)
        del meta.collection_def[key]


def _scoped_graph_def(graph_def, export_scope, clear_devices):
    """The nodes under `export_scope` with the scope stripped (devices cleared if asked)."""
    out = type(graph_def)()
    out.versions.CopyFrom(graph_def.versions)
    out.library.CopyFrom(graph_def.library)
    for nd in graph_def.node:
        if export_scope and not nd.name.startswith(export_scope + "/"):
            continue
        new = out.node.add()
        new.CopyFrom(nd)
        if export_scope:
            new.name = _strip(nd.name, export_scope)
            del new.input[:]
            for inp in nd.input:
                bare = inp.lstrip("^")
                if not bare.startswith(export_scope + "/"):
                    raise ValueError(
                        f"export_meta_graph(export_scope={export_scope!r}): node {nd.name} reads "
                        f"{inp}, which is outside the scope"
                    )
                new.input.append(_strip(inp, export_scope))
            if "_class" in new.attr:
                locs = [
                    b"loc:@" + _strip(c.decode()[5:], export_scope).encode()
                    for c in new.attr["_class"].list.s
                ]
                del new.attr["_class"].list.s[:]
                new.attr["_class"].list.s.extend(locs)
        if clear_devices:
            new.device = ""
    return out


def export_meta_graph(
    filename=None,
    meta_info_def=None,
    graph_def=None,
    saver_def=None,
    collection_list=None,
    as_text=False,
    graph=None,
    export_scope=None,
    clear_devices=False,
    clear_extraneous_savers=False,
    strip_default_attrs=False,
    save_debug_info=False,
    **kwargs,
) -> MetaGraphDef:
    """Builds (and writes to `filename`, atomically) the MetaGraphDef of `graph`.

    Example: tf.train.export_meta_graph("/tmp/model.meta")"""
    if kwargs:
        raise TypeError(f"export_meta_graph() got unexpected arguments: {sorted(kwargs)}")
    if save_debug_info:
        raise NotImplementedError("export_meta_graph(save_debug_info=True): no GraphDebugInfo")
    graph = graph if graph is not None else default_graph.get()
    if graph_def is None:
        graph_def = graph.as_graph_def(add_shapes=True)
    if strip_default_attrs:
        graph_def = _strip_default_attrs(graph_def)
    meta = MetaGraphDef()
    if meta_info_def is not None:
        meta.meta_info_def.CopyFrom(meta_info_def)
    meta.meta_info_def.tensorflow_version = version.VERSION
    meta.meta_info_def.tensorflow_git_version = version.GIT_VERSION
    meta.meta_info_def.stripped_default_attrs = bool(strip_default_attrs)
    meta.graph_def.CopyFrom(_scoped_graph_def(graph_def, export_scope, clear_devices))
    if not meta.meta_info_def.stripped_op_list.op:
        meta.meta_info_def.stripped_op_list.CopyFrom(stripped_op_list(meta.graph_def))
    if saver_def is not None:
        meta.saver_def.CopyFrom(saver_def)
    keys = collection_list if collection_list is not None else graph.get_all_collection_keys()
    for key in keys:
        if clear_extraneous_savers and key == GraphKeys.SAVERS:
            continue
        _add_collection(meta, graph, key, export_scope)
    if filename:
        write_meta_graph_file(meta, filename, as_text)
    return meta


def stripped_op_list(graph_def) -> OpList:
    """The OpDefs (as protos) of the op types `graph_def` uses, sorted by name: a reader can
    tell which attrs it may drop because they hold the producer's default (TF's
    stripped_op_list_for_graph)."""
    from flowgraph.core.op_def import registered_ops

    ops = registered_ops()
    out = OpList()
    for name in sorted({n.op for n in graph_def.node}):
        if name in ops:
            out.op.append(_op_def_proto(ops[name]))
    return out


def _op_def_proto(op_def) -> OpDefProto:
    from flowgraph.core.attr_value import to_attr_value

    p = OpDefProto(name=op_def.name, is_stateful=op_def.is_stateful)
    for args, field in ((op_def.inputs, p.input_arg), (op_def.outputs, p.output_arg)):
        for a in args:
            arg = field.add(name=a.name, is_ref=a.is_ref)
            if a.type is not None:
                arg.type = a.type.as_datatype_enum
            arg.type_attr = a.type_attr or ""
            arg.number_attr = a.number_attr or ""
            arg.type_list_attr = a.type_list_attr or ""
    for a in op_def.attrs.values():
        attr = p.attr.add(name=a.name, type=a.type)
        if a.has_default and a.default is not None:
            attr.default_value.CopyFrom(to_attr_value(a.default, a.type))
        if a.allowed:
            kind = "list(type)" if a.type.endswith("type") else "list(string)"
            attr.allowed_values.CopyFrom(to_attr_value(list(a.allowed), kind))
        if a.minimum is not None:
            attr.has_minimum = True
            attr.minimum = int(a.minimum)
    return p


def _strip_default_attrs(graph_def):
    from flowgraph.core.attr_value import to_attr_value
    from flowgraph.core.op_def import registered_ops

    out = type(graph_def)()
    out.CopyFrom(graph_def)
    ops = registered_ops()
    for nd in out.node:
        op_def = ops.get(nd.op)
        if op_def is None:
            continue
        for name, attr in op_def.attrs.items():
            if not attr.has_default or name not in nd.attr:
                continue
            if nd.attr[name] == to_attr_value(attr.default, attr.type):
                del nd.attr[name]
    return out


def write_meta_graph_file(meta: MetaGraphDef, filename, as_text=False) -> str:
    """Writes a MetaGraphDef under a temporary name and renames it into place."""
    filename = os.fspath(filename)
    d = os.path.dirname(filename)
    if d:
        os.makedirs(d, exist_ok=True)
    data = text_format.MessageToString(meta).encode() if as_text else meta.SerializeToString()
    tmp = filename + temp_suffix()
    with fs.open_write(tmp) as f:
        f.write(data)
    fs.rename(tmp, filename)
    return filename


def read_meta_graph_file(filename) -> MetaGraphDef:
    """A MetaGraphDef from a binary or text file; IOError if it is missing or neither."""
    filename = os.fspath(filename)
    if not os.path.isfile(filename):
        raise OSError(f"File {filename} does not exist.")
    with open(filename, "rb") as f:
        data = f.read()
    meta = MetaGraphDef()
    try:
        meta.ParseFromString(data)
        return meta
    except DecodeError:
        pass
    try:
        text_format.Merge(data.decode("utf-8"), meta)
    except (text_format.ParseError, UnicodeDecodeError) as e:
        raise OSError(f"Cannot parse file {filename}: {e}.") from None
    return meta


def import_scoped_meta_graph(
    meta_graph_or_file,
    clear_devices=False,
    graph=None,
    import_scope=None,
    input_map=None,
    restore_collections_predicate=None,
    return_elements=None,
):
    """Imports the graph and collections; returns ({name: Variable}, return elements)."""
    meta = meta_graph_or_file
    if not isinstance(meta, MetaGraphDef):
        meta = read_meta_graph_file(meta)
    graph = graph if graph is not None else default_graph.get()
    graph_def = meta.graph_def
    if clear_devices:
        graph_def = _scoped_graph_def(graph_def, None, True)
    producer = meta.meta_info_def.stripped_op_list if meta.HasField("meta_info_def") else None
    if producer is not None and not producer.op:
        producer = None
    with graph.as_default():
        returned = import_graph_def(
            graph_def,
            input_map=input_map,
            name=import_scope or "",
            return_elements=return_elements,
            producer_op_list=producer,
        )
    scope = import_scope or ""
    keep = restore_collections_predicate or (lambda key: True)
    objects: dict = {}
    for key, col in sorted(meta.collection_def.items()):
        if keep(key):
            _restore_collection(graph, key, col, scope, objects)
    var_list = {}
    for v in graph.get_collection(GraphKeys.GLOBAL_VARIABLES, scope=scope or None):
        var_list[_strip(v.name, scope)] = v
    return var_list, returned


def _restore_collection(graph, key, col, scope, objects):
    kind = col.WhichOneof("kind")
    if kind is None:
        log.error("Cannot identify data type for collection %s. Skipping.", key)
        return
    entry = PROTO_FUNCTIONS.get(key)
    if entry is not None and kind == "bytes_list":
        proto_type, _, from_proto = entry
        for value in col.bytes_list.value:
            obj = objects.get(value)
            if obj is None:
                proto = proto_type.FromString(value)
                with graph.as_default():
                    obj = from_proto(proto, import_scope=scope or None)
                objects[value] = obj
            graph.add_to_collection(key, obj)
        return
    values = getattr(col, kind).value
    if kind == "node_list":
        for name in values:
            graph.add_to_collection(key, graph.as_graph_element(_prepend(name, scope)))
    elif kind == "int64_list":
        for v in values:
            graph.add_to_collection(key, int(v))
    elif kind == "float_list":
        for v in values:
            graph.add_to_collection(key, float(v))
    else:
        for v in values:
            graph.add_to_collection(key, v)


def import_meta_graph(meta_graph_or_file, clear_devices=False, import_scope=None, **kwargs):
    """Recreates a saved graph in the default graph; returns a Saver built from its SaverDef
    (or one over its variables), or None when there is nothing to restore.

    Example:
        saver = tf.train.import_meta_graph("/tmp/run/model.ckpt-100.meta")
        saver.restore(sess, "/tmp/run/model.ckpt-100")
        probs = sess.graph.get_tensor_by_name("probs:0")
    """
    from flowgraph.train.saver import Saver

    return_elements = kwargs.pop("return_elements", None)
    meta = meta_graph_or_file
    if not isinstance(meta, MetaGraphDef):
        meta = read_meta_graph_file(meta)
    var_list, returned = import_scoped_meta_graph(
        meta,
        clear_devices=clear_devices,
        import_scope=import_scope,
        return_elements=return_elements,
        **kwargs,
    )
    saver = None
    if meta.HasField("saver_def"):
        saver = Saver(saver_def=meta.saver_def, name=import_scope)
    elif var_list:
        saver = Saver()
    else:
        log.info("Saver not created because there are no variables in the graph to restore")
    if return_elements is not None:
        return saver, returned
    return saver
