"""SignatureDefs: the named inputs and outputs of a served MetaGraph, as TensorInfos (TF1's
signature_def_utils and saved_model/utils.py)."""

from __future__ import annotations

from flowgraph.core import dtypes
from flowgraph.core.protos import DataType, SignatureDef, TensorInfo
from flowgraph.framework import default_graph
from flowgraph.saved_model.constants import signature_constants as sc

__all__ = [
    "build_signature_def",
    "build_tensor_info",
    "classification_signature_def",
    "get_tensor_from_tensor_info",
    "is_valid_signature",
    "predict_signature_def",
    "regression_signature_def",
]


def build_tensor_info(tensor) -> TensorInfo:
    """The TensorInfo (name, dtype, shape) of a Tensor.

    Example: info = tf.saved_model.utils.build_tensor_info(x)"""
    if not hasattr(tensor, "dtype") or not hasattr(tensor, "name"):
        raise TypeError(f"build_tensor_info needs a Tensor, got {type(tensor).__name__}")
    info = TensorInfo(name=tensor.name, dtype=tensor.dtype.base_dtype.as_datatype_enum)
    info.tensor_shape.CopyFrom(tensor.get_shape().as_proto())
    return info


def get_tensor_from_tensor_info(tensor_info, graph=None, import_scope=None):
    """The Tensor a TensorInfo names in `graph` (after an import under `import_scope`)."""
    graph = graph if graph is not None else default_graph.get()
    encoding = tensor_info.WhichOneof("encoding")
    if encoding != "name":
        raise ValueError(f"Invalid TensorInfo.encoding: {encoding}")
    name = f"{import_scope}/{tensor_info.name}" if import_scope else tensor_info.name
    return graph.get_tensor_by_name(name)


def build_signature_def(inputs=None, outputs=None, method_name=None) -> SignatureDef:
    """A SignatureDef of {key: TensorInfo} inputs and outputs."""
    sig = SignatureDef()
    for key, info in (inputs or {}).items():
        sig.inputs[key].CopyFrom(info)
    for key, info in (outputs or {}).items():
        sig.outputs[key].CopyFrom(info)
    if method_name is not None:
        sig.method_name = method_name
    return sig


def predict_signature_def(inputs, outputs) -> SignatureDef:
    """A Predict SignatureDef of {key: Tensor} inputs and outputs.

    Example: sig = predict_signature_def({"x": x}, {"probs": probs})"""
    if inputs is None or not inputs:
        raise ValueError("Prediction inputs cannot be None or empty.")
    if outputs is None or not outputs:
        raise ValueError("Prediction outputs cannot be None or empty.")
    return build_signature_def(
        {k: build_tensor_info(t) for k, t in inputs.items()},
        {k: build_tensor_info(t) for k, t in outputs.items()},
        sc.PREDICT_METHOD_NAME,
    )


def classification_signature_def(examples, classes, scores) -> SignatureDef:
    """A Classify SignatureDef: serialized tf.Examples in, classes and/or scores out."""
    if examples is None or examples.dtype.base_dtype != dtypes.string:
        raise ValueError("Classification examples must be a string Tensor.")
    if classes is None and scores is None:
        raise ValueError("Classification classes and scores cannot both be None.")
    outputs = {}
    if classes is not None:
        if classes.dtype.base_dtype != dtypes.string:
            raise ValueError("Classification classes must be a string Tensor.")
        outputs[sc.CLASSIFY_OUTPUT_CLASSES] = build_tensor_info(classes)
    if scores is not None:
        if scores.dtype.base_dtype != dtypes.float32:
            raise ValueError("Classification scores must be a float32 Tensor.")
        outputs[sc.CLASSIFY_OUTPUT_SCORES] = build_tensor_info(scores)
    return build_signature_def(
        {sc.CLASSIFY_INPUTS: build_tensor_info(examples)}, outputs, sc.CLASSIFY_METHOD_NAME
    )


def regression_signature_def(examples, predictions) -> SignatureDef:
    """A Regress SignatureDef: serialized tf.Examples in, float32 predictions out."""
    if examples is None or examples.dtype.base_dtype != dtypes.string:
        raise ValueError("Regression examples must be a string Tensor.")
    if predictions is None or predictions.dtype.base_dtype != dtypes.float32:
        raise ValueError("Regression output must be a float32 Tensor.")
    return build_signature_def(
        {sc.REGRESS_INPUTS: build_tensor_info(examples)},
        {sc.REGRESS_OUTPUTS: build_tensor_info(predictions)},
        sc.REGRESS_METHOD_NAME,
    )


def is_valid_signature(signature_def) -> bool:
    """Whether a SignatureDef is a well-formed predict, classify or regress signature."""
    if signature_def is None or not signature_def.method_name:
        return False
    if signature_def.method_name == sc.PREDICT_METHOD_NAME:
        return bool(signature_def.inputs) and bool(signature_def.outputs)
    if signature_def.method_name == sc.CLASSIFY_METHOD_NAME:
        ins = signature_def.inputs
        return (
            set(ins) == {sc.CLASSIFY_INPUTS}
            and ins[sc.CLASSIFY_INPUTS].dtype == DataType.DT_STRING
            and bool(signature_def.outputs)
        )
    if signature_def.method_name == sc.REGRESS_METHOD_NAME:
        return set(signature_def.inputs) == {sc.REGRESS_INPUTS} and set(signature_def.outputs) == {
            sc.REGRESS_OUTPUTS
        }
    return False
