"""The names a SavedModel directory and its MetaGraphs use (TF1's saved_model/constants.py,
tag_constants.py and signature_constants.py)."""

SAVED_MODEL_SCHEMA_VERSION = 1
SAVED_MODEL_FILENAME_PB = "saved_model.pb"
SAVED_MODEL_FILENAME_PBTXT = "saved_model.pbtxt"
VARIABLES_DIRECTORY = "variables"
VARIABLES_FILENAME = "variables"
ASSETS_DIRECTORY = "assets"
EXTRA_ASSETS_DIRECTORY = "assets.extra"
ASSETS_KEY = "saved_model_assets"
MAIN_OP_KEY = "saved_model_main_op"
LEGACY_INIT_OP_KEY = "legacy_init_op"
TRAIN_OP_KEY = "saved_model_train_op"
INIT_OP_SIGNATURE_KEY = "__saved_model_init_op"
TRAIN_OP_SIGNATURE_KEY = "__saved_model_train_op"


class tag_constants:
    """Tags of the MetaGraphs in a SavedModel."""

    SERVING = "serve"
    TRAINING = "train"
    EVAL = "eval"
    GPU = "gpu"
    TPU = "tpu"


class signature_constants:
    """Keys and method names of SignatureDefs."""

    DEFAULT_SERVING_SIGNATURE_DEF_KEY = "serving_default"
    PREDICT_METHOD_NAME = "tensorflow/serving/predict"
    PREDICT_INPUTS = "inputs"
    PREDICT_OUTPUTS = "outputs"
    CLASSIFY_METHOD_NAME = "tensorflow/serving/classify"
    CLASSIFY_INPUTS = "inputs"
    CLASSIFY_OUTPUT_CLASSES = "classes"
    CLASSIFY_OUTPUT_SCORES = "scores"
    REGRESS_METHOD_NAME = "tensorflow/serving/regress"
    REGRESS_INPUTS = "inputs"
    REGRESS_OUTPUTS = "outputs"
