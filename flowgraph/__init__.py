"""flowgraph: the TensorFlow whitepaper's system with the TF1 graph-mode API.

`import flowgraph as tf` gives the tf.* namespace. This module only re-exports: every name
comes from the module that owns it, through that module's `__all__`.
"""

import sys

from flowgraph.core import errors
from flowgraph.core.device_spec import DeviceSpec
from flowgraph.core.dtypes import (
    DType,
    as_dtype,
    bfloat16,
    bool_ as bool,
    complex64,
    complex128,
    double,
    float16,
    float32,
    float64,
    half,
    int8,
    int16,
    int32,
    int64,
    resource,
    string,
    uint8,
    uint16,
    uint32,
    uint64,
    variant,
)
from flowgraph.core.errors import OpError
from flowgraph.core.protos import (
    AttrValue,
    ConfigProto,
    Event,
    GPUOptions,
    GraphDef,
    GraphOptions,
    HistogramProto,
    NodeDef,
    OptimizerOptions,
    RunMetadata,
    RunOptions,
    SessionLog,
    Summary,
    SummaryMetadata,
)
from flowgraph.core.shapes import Dimension, TensorShape
from flowgraph.framework.convert import register_tensor_conversion_function
from flowgraph.framework.graph import Graph, GraphKeys, get_default_graph, reset_default_graph
from flowgraph.framework.importer import import_graph_def
from flowgraph.framework.recompute import recompute_grad
from flowgraph.framework.scopes import *  # noqa: F403
from flowgraph.framework.tensor_util import *  # noqa: F403
from flowgraph.framework.operation import Operation, Tensor
from flowgraph.ops.array import *  # noqa: F403
from flowgraph.ops.array_index import *  # noqa: F403
from flowgraph.ops.clip import *  # noqa: F403
from flowgraph.ops.control_flow import *  # noqa: F403
from flowgraph.ops.data_flow import *  # noqa: F403
from flowgraph.ops.init_ops import *  # noqa: F403
from flowgraph.ops.linalg import *  # noqa: F403
from flowgraph.ops.linalg_decomp import *  # noqa: F403
from flowgraph.ops.array_nd import *  # noqa: F403
from flowgraph.ops.logging import *  # noqa: F403
from flowgraph.ops.math import *  # noqa: F403
from flowgraph.ops.reduction import *  # noqa: F403
from flowgraph.ops.random import *  # noqa: F403
from flowgraph.ops.variable_ops import *  # noqa: F403
from flowgraph.ops.variables import *  # noqa: F403
from flowgraph.ops.variable_scope import *  # noqa: F403
from flowgraph.ops.partitioned_variables import *  # noqa: F403
from flowgraph.ops.script_ops import *  # noqa: F403
from flowgraph.ops.queues import *  # noqa: F403
from flowgraph.ops.readers import *  # noqa: F403
from flowgraph.ops.parsing_ops import *  # noqa: F403
from flowgraph.ops.sparse import *  # noqa: F403
from flowgraph.ops.sparse_math import *  # noqa: F403
from flowgraph.ops.accumulators import *  # noqa: F403
from flowgraph.ops.deprecated import *  # noqa: F403
from flowgraph.ops.segment import *  # noqa: F403
from flowgraph.ops.string_ops import *  # noqa: F403
from flowgraph.ops.lookup_ops import *  # noqa: F403
from flowgraph.ops.special_math import *  # noqa: F403
from flowgraph.ops.sort_ops import *  # noqa: F403
from flowgraph.ops.array_compose import *  # noqa: F403
from flowgraph.ops.array_space import *  # noqa: F403
from flowgraph.ops.norms import *  # noqa: F403
from flowgraph.ops.confusion_matrix import *  # noqa: F403
from flowgraph.ops.check_ops import *  # noqa: F403
from flowgraph.ops.template import make_template  # noqa: E402
from flowgraph.train.loops import matching_files  # noqa: E402
from flowgraph.gradients import *  # noqa: F403
from flowgraph.session.default_session import get as get_default_session
from flowgraph.session.session import InteractiveSession, Session
from flowgraph import layers, train  # noqa: E402
from flowgraph import summary  # noqa: E402
from flowgraph import saved_model  # noqa: E402
from flowgraph import data  # noqa: E402
from flowgraph import profiler  # noqa: E402
from flowgraph import distribute  # noqa: E402
from flowgraph.namespaces import (  # noqa: E402
    contrib,
    graph_util,
    initializers,
    linalg,
    losses,
    math,
    metrics,
    nest,
    nn,
    random,
    test,
)
from flowgraph.namespaces import app, flags, gfile, io, logging, version  # noqa: E402
from flowgraph.namespaces import image, python_io, queue  # noqa: E402
from flowgraph.namespaces import sparse  # noqa: E402
from flowgraph.namespaces import strings  # noqa: E402
from flowgraph.namespaces import lookup  # noqa: E402
from flowgraph.namespaces import sets  # noqa: E402
from flowgraph.namespaces import manip  # noqa: E402
from flowgraph.namespaces import bitwise, debugging, dtypes  # noqa: E402
from flowgraph.namespaces import xla  # noqa: E402
from flowgraph.platform.version import COMPILER_VERSION, GIT_VERSION, VERSION, __version__  # noqa: E402
from flowgraph import compat  # noqa: E402
from flowgraph.compat import *  # noqa: F403,E402
from flowgraph import api_surface as _api_surface  # noqa: E402

_api_surface.install(sys.modules[__name__])
