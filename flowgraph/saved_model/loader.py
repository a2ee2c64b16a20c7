"""Loading a SavedModel into a session (TF1's saved_model/loader_impl.py): pick the MetaGraph
whose tags match, import it, restore variables/variables, then run its init op with the asset
paths fed."""

from __future__ import annotations

import logging
import os

from google.protobuf import text_format
from google.protobuf.message import DecodeError

from flowgraph.core.protos import AssetFileDef, SavedModel
from flowgraph.saved_model import constants
from flowgraph.saved_model.builder import variables_path
from flowgraph.train import meta_graph
from flowgraph.train.saver import Saver

__all__ = ["SavedModelLoader", "contains_saved_model", "load", "maybe_saved_model_directory"]

log = logging.getLogger(__name__)


def _paths(export_dir):
    d = os.fspath(export_dir)
    return (
        os.path.join(d, constants.SAVED_MODEL_FILENAME_PB),
        os.path.join(d, constants.SAVED_MODEL_FILENAME_PBTXT),
    )


def parse_saved_model(export_dir) -> SavedModel:
    """The SavedModel proto of a directory (binary preferred); OSError if there is none."""
    pb, pbtxt = _paths(export_dir)
    model = SavedModel()
    if os.path.isfile(pb):
        with open(pb, "rb") as f:
            try:
                model.ParseFromString(f.read())
            except DecodeError as e:
                raise OSError(f"Cannot parse file {pb}: {e}.") from None
        return model
    if os.path.isfile(pbtxt):
        with open(pbtxt) as f:
            try:
                text_format.Merge(f.read(), model)
            except text_format.ParseError as e:
                raise OSError(f"Cannot parse file {pbtxt}: {e}.") from None
        return model
    raise OSError(
        f"SavedModel file does not exist at: {os.fspath(export_dir)}/{{"
        f"{constants.SAVED_MODEL_FILENAME_PBTXT}|{constants.SAVED_MODEL_FILENAME_PB}}}"
    )


def contains_saved_model(export_dir) -> bool:
    return any(os.path.isfile(p) for p in _paths(export_dir))


maybe_saved_model_directory = contains_saved_model


def _scoped(name: str, scope) -> str:
    return f"{scope}/{name}" if scope else name


class SavedModelLoader:
    """Loads the MetaGraphs of one SavedModel directory."""

    def __init__(self, export_dir):
        self._export_dir = os.fspath(export_dir)
        self._variables_path = variables_path(export_dir)
        self._saved_model = parse_saved_model(export_dir)

    @property
    def export_dir(self):
        return self._export_dir

    @property
    def variables_path(self):
        return self._variables_path

    @property
    def saved_model(self):
        return self._saved_model

    def get_meta_graph_def_from_tags(self, tags):
        for mg in self._saved_model.meta_graphs:
            if set(mg.meta_info_def.tags) == set(tags):
                return mg
        available = [list(mg.meta_info_def.tags) for mg in self._saved_model.meta_graphs]
        raise RuntimeError(
            f"MetaGraphDef associated with tags {str(list(tags)).strip('[]')} could not be found "
            f"in SavedModel. Available tags: {available}"
        )

    def load_graph(self, graph, tags, import_scope=None, **saver_kwargs):
        """Imports the matching MetaGraph into `graph`; returns (Saver or None, elements)."""
        mg = self.get_meta_graph_def_from_tags(tags)
        with graph.as_default():
            return meta_graph.import_meta_graph(
                mg, import_scope=import_scope, return_elements=[], **saver_kwargs
            )

    def restore_variables(self, sess, saver, import_scope=None):
        with sess.graph.as_default():
            scope = import_scope or None
            if saver is None and not sess.graph.get_collection("variables", scope=scope):
                log.info("The specified SavedModel has no variables; no checkpoints were restored.")
            elif isinstance(saver, Saver):
                saver.restore(sess, self._variables_path)
            else:
                raise ValueError(
                    "No tf.train.Saver object was passed to the function "
                    "`SavedModelLoader.restore_variables`. Since there are variables in the "
                    "graph, a saver is required."
                )

    def run_init_ops(self, sess, tags, import_scope=None):
        mg = self.get_meta_graph_def_from_tags(tags)
        graph = sess.graph
        feeds = {}
        col = mg.collection_def.get(constants.ASSETS_KEY)
        if col is not None:
            for value in col.any_list.value if col.WhichOneof("kind") == "any_list" else []:
                proto = AssetFileDef()
                value.Unpack(proto)
                feeds[_scoped(proto.tensor_info.name, import_scope)] = self._asset(proto)
            for value in col.bytes_list.value if col.WhichOneof("kind") == "bytes_list" else []:
                proto = AssetFileDef.FromString(value)
                feeds[_scoped(proto.tensor_info.name, import_scope)] = self._asset(proto)
        init = _init_op(mg, graph, import_scope)
        if init is not None:
            sess.run([init], feed_dict=feeds)

    def _asset(self, proto) -> str:
        return os.path.join(self._export_dir, constants.ASSETS_DIRECTORY, proto.filename)

    def load(self, sess, tags, import_scope=None, **saver_kwargs):
        """Imports, restores and initializes; returns the loaded MetaGraphDef."""
        with sess.graph.as_default():
            saver, _ = self.load_graph(sess.graph, tags, import_scope, **saver_kwargs)
            self.restore_variables(sess, saver, import_scope)
            self.run_init_ops(sess, tags, import_scope)
        return self.get_meta_graph_def_from_tags(tags)


def _init_op(mg, graph, import_scope):
    """The init op: the `__saved_model_init_op` signature (TF2 writers), else the main op or
    legacy init op collection (TF1 writers)."""
    key = constants.INIT_OP_SIGNATURE_KEY
    if key in mg.signature_def:
        name = mg.signature_def[key].outputs[key].name
        return graph.as_graph_element(_scoped(name, import_scope))
    for col_key in (constants.MAIN_OP_KEY, constants.LEGACY_INIT_OP_KEY):
        col = mg.collection_def.get(col_key)
        if col is not None and col.node_list.value:
            if len(col.node_list.value) != 1:
                raise RuntimeError(
                    f"Expected exactly one SavedModel main op. Found: {list(col.node_list.value)}"
                )
            return graph.as_graph_element(_scoped(col.node_list.value[0], import_scope))
    return None


def load(sess, tags, export_dir, import_scope=None, **saver_kwargs):
    """Loads the MetaGraph tagged `tags` from `export_dir` into `sess`; returns it.

    Example:
        mg = tf.saved_model.loader.load(sess, ["serve"], export_dir)
        sig = mg.signature_def["serving_default"]
    """
    return SavedModelLoader(export_dir).load(sess, tags, import_scope, **saver_kwargs)
