"""SavedModelBuilder: one checkpoint plus tagged MetaGraphs in TensorFlow's directory layout
(TF1's saved_model/builder_impl.py):

    export_dir/saved_model.pb        a SavedModel proto: MetaGraphs with tags and signatures
    export_dir/variables/variables.{index,data-*}   the (sharded) checkpoint all of them share
    export_dir/assets/               files named by the ASSET_FILEPATHS collection
"""

from __future__ import annotations

import logging
import os
import shutil

from google.protobuf import text_format

from flowgraph.core.protos import AssetFileDef, DataType, SavedModel, SaverDef
from flowgraph.core.tensor_bundle import fs, temp_suffix
from flowgraph.framework import default_graph
from flowgraph.framework.convert import constant_value
from flowgraph.framework.operation import Operation
from flowgraph.saved_model import constants
from flowgraph.saved_model.signature_def_utils import predict_signature_def
from flowgraph.train import saveable as saveable_lib
from flowgraph.train.meta_graph import register_proto_function
from flowgraph.train.saver import Saver

__all__ = ["SavedModelBuilder", "simple_save"]

log = logging.getLogger(__name__)

# An asset is stored in the MetaGraph as an AssetFileDef (file name + the tensor to feed).
register_proto_function(
    constants.ASSETS_KEY,
    proto_type=AssetFileDef,
    to_proto=lambda p, export_scope=None: p,
    from_proto=lambda p, import_scope=None: p,
)


def variables_dir(export_dir) -> str:
    return os.path.join(os.fspath(export_dir), constants.VARIABLES_DIRECTORY)


def variables_path(export_dir) -> str:
    return os.path.join(variables_dir(export_dir), constants.VARIABLES_FILENAME)


class SavedModelBuilder:
    """Builds a SavedModel: add_meta_graph_and_variables once, add_meta_graph for more tag
    sets, then save().

    Example:
        b = tf.saved_model.builder.SavedModelBuilder(export_dir)
        b.add_meta_graph_and_variables(sess, ["serve"], signature_def_map={"serving_default": sig})
        b.save()
    """

    def __init__(self, export_dir):
        self._export_dir = os.fspath(export_dir)
        self._saved_model = SavedModel(
            saved_model_schema_version=constants.SAVED_MODEL_SCHEMA_VERSION
        )
        if os.path.exists(self._export_dir):
            if os.listdir(self._export_dir):
                raise AssertionError(
                    "Export directory already exists, and isn't empty. Please choose a different "
                    f"export directory, or delete all the contents of the specified directory: "
                    f"{self._export_dir}"
                )
        else:
            os.makedirs(self._export_dir)
        self._has_saved_variables = False

    def _validate_signature_def_map(self, signature_def_map):
        for key, sig in signature_def_map.items():
            for info in list(sig.inputs.values()) + list(sig.outputs.values()):
                if info.WhichOneof("encoding") is None or (
                    info.WhichOneof("encoding") == "name" and not info.name
                ):
                    raise AssertionError(
                        f"All TensorInfo protos used in the SignatureDefs must have the name and "
                        f"dtype fields set (signature {key!r})"
                    )
                if info.dtype == DataType.DT_INVALID:
                    raise AssertionError(
                        f"TensorInfo {info.name} of signature {key!r} has no dtype"
                    )
        for reserved in (constants.INIT_OP_SIGNATURE_KEY, constants.TRAIN_OP_SIGNATURE_KEY):
            if reserved in signature_def_map:
                raise KeyError(f"SignatureDef map key {reserved!r} is reserved for the init op")

    def _save_and_write_assets(self, assets_collection):
        files = {}
        graph = default_graph.get()
        for tensor in assets_collection or ():
            path = constant_value(tensor)
            if path is None:
                raise TypeError(f"Asset path tensor {tensor.name} must be a constant string")
            path = path.item() if hasattr(path, "item") else path
            path = path.decode() if isinstance(path, bytes) else str(path)
            name = os.path.basename(path)
            files[name] = path
            graph.add_to_collection(
                constants.ASSETS_KEY, AssetFileDef(filename=name, tensor_info={"name": tensor.name})
            )
        if not files:
            return
        assets = os.path.join(self._export_dir, constants.ASSETS_DIRECTORY)
        os.makedirs(assets, exist_ok=True)
        for name, src in files.items():
            dst = os.path.join(assets, name)
            if not os.path.exists(dst):
                shutil.copyfile(src, dst)

    def _maybe_add_main_op(self, main_op):
        if main_op is None:
            return
        if not isinstance(main_op, Operation):
            raise TypeError(f"main_op needs to be an Operation: {main_op!r}")
        graph = default_graph.get()
        for key in (constants.MAIN_OP_KEY, constants.LEGACY_INIT_OP_KEY):
            if graph.get_collection(key):
                raise ValueError(
                    f"Graph already contains one or more main ops under the collection {key}."
                )
        graph.add_to_collection(constants.MAIN_OP_KEY, main_op)

    def _maybe_create_saver(self, saver=None):
        if saver:
            return saver
        return Saver(
            saveable_lib.all_saveable_objects(),
            sharded=True,
            write_version=SaverDef.V2,
            allow_empty=True,
        )

    def _tag_and_add_meta_graph(self, meta_graph_def, tags, signature_def_map):
        meta_graph_def.meta_info_def.tags.extend(tags)
        for key, sig in (signature_def_map or {}).items():
            meta_graph_def.signature_def[key].CopyFrom(sig)
        self._saved_model.meta_graphs.add().CopyFrom(meta_graph_def)

    def add_meta_graph_and_variables(
        self,
        sess,
        tags,
        signature_def_map=None,
        assets_collection=None,
        legacy_init_op=None,
        clear_devices=False,
        main_op=None,
        strip_default_attrs=False,
        saver=None,
    ):
        """Saves the session's variables under variables/ and adds the graph with `tags`."""
        if self._has_saved_variables:
            raise AssertionError(
                "Graph state including variables and assets has already been saved. Please "
                "invoke `add_meta_graph()` instead."
            )
        signature_def_map = signature_def_map or {}
        self._validate_signature_def_map(signature_def_map)
        with sess.graph.as_default():
            self._save_and_write_assets(assets_collection)
            self._maybe_add_main_op(main_op or legacy_init_op)
            os.makedirs(variables_dir(self._export_dir), exist_ok=True)
            saver = self._maybe_create_saver(saver)
            saver.save(
                sess, variables_path(self._export_dir), write_meta_graph=False, write_state=False
            )
            meta = saver.export_meta_graph(
                clear_devices=clear_devices, strip_default_attrs=strip_default_attrs
            )
        self._tag_and_add_meta_graph(meta, tags, signature_def_map)
        self._has_saved_variables = True

    def add_meta_graph(
        self,
        tags,
        signature_def_map=None,
        assets_collection=None,
        legacy_init_op=None,
        clear_devices=False,
        main_op=None,
        strip_default_attrs=False,
        saver=None,
    ):
        """Adds the default graph under another tag set, sharing the saved variables."""
        if not self._has_saved_variables:
            raise AssertionError(
                "Graph state including variables and assets has not been saved yet. Please "
                "invoke `add_meta_graph_and_variables()` first."
            )
        signature_def_map = signature_def_map or {}
        self._validate_signature_def_map(signature_def_map)
        self._save_and_write_assets(assets_collection)
        self._maybe_add_main_op(main_op or legacy_init_op)
        saver = self._maybe_create_saver(saver)
        meta = saver.export_meta_graph(
            clear_devices=clear_devices, strip_default_attrs=strip_default_attrs
        )
        self._tag_and_add_meta_graph(meta, tags, signature_def_map)

    def save(self, as_text=False) -> str:
        """Writes saved_model.pb (or .pbtxt) under a temporary name and renames it."""
        os.makedirs(self._export_dir, exist_ok=True)
        if as_text:
            path = os.path.join(self._export_dir, constants.SAVED_MODEL_FILENAME_PBTXT)
            data = text_format.MessageToString(self._saved_model).encode()
        else:
            path = os.path.join(self._export_dir, constants.SAVED_MODEL_FILENAME_PB)
            data = self._saved_model.SerializeToString(deterministic=True)
        tmp = path + temp_suffix()
        with fs.open_write(tmp) as f:
            f.write(data)
        fs.rename(tmp, path)
        log.info("SavedModel written to: %s", path)
        return path


def simple_save(session, export_dir, inputs, outputs, legacy_init_op=None):
    """Saves a serving SavedModel with one Predict signature ("serving_default").

    Example: tf.saved_model.simple_save(sess, "/tmp/m", {"x": x}, {"probs": probs})"""
    sig = {
        constants.signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY: predict_signature_def(
            inputs, outputs
        )
    }
    b = SavedModelBuilder(export_dir)
    with session.graph.as_default():
        assets = session.graph.get_collection("asset_filepaths")
    b.add_meta_graph_and_variables(
        session,
        [constants.tag_constants.SERVING],
        signature_def_map=sig,
        assets_collection=assets,
        main_op=legacy_init_op,
        clear_devices=True,
    )
    b.save()
