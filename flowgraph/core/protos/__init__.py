"""Our protocol buffers: TensorFlow's messages and field numbers, in package `flowgraph`.

Files written by real TensorFlow parse here without loss and ours parse in TensorFlow (DESIGN.md
decision 2). The package is `flowgraph`, not `tensorflow`, so that a real TensorFlow can be
imported in the same process without a descriptor-pool clash.

The `*_pb2.py` modules are generated and committed; after editing a `.proto` file run
`python tools/gen_protos.py` (a test fails while they are stale). Import messages from here:

    from flowgraph.core.protos import GraphDef, NodeDef, AttrValue, TensorProto

The distributed runtime's requests and responses (§3.3) stay in their modules, named as in
TensorFlow: `master_pb2`, `worker_pb2`; their services, in package `flowgraph.grpc`, are
`master_service_pb2.MasterService` and `worker_service_pb2.WorkerService`, which the gRPC
adapters serve under TensorFlow's paths (`/tensorflow.grpc.MasterService/RunStep`, ...).
"""

from flowgraph.core.protos.attr_value_pb2 import AttrValue, NameAttrList
from flowgraph.core.protos.cluster_pb2 import ClusterDef, JobDef
from flowgraph.core.protos.config_pb2 import (
    CallableOptions,
    ConfigProto,
    DebugOptions,
    DebugTensorWatch,
    GPUOptions,
    GraphOptions,
    OptimizerOptions,
    RPCOptions,
    RunMetadata,
    RunOptions,
    SessionMetadata,
    TensorConnection,
    ThreadPoolOptionProto,
)
from flowgraph.core.protos.cost_graph_pb2 import CostGraphDef
from flowgraph.core.protos.device_attributes_pb2 import DeviceAttributes, DeviceLocality
from flowgraph.core.protos.event_pb2 import (
    Event,
    LogMessage,
    SessionLog,
    SourceMetadata,
    TaggedRunMetadata,
)
from flowgraph.core.protos.example_pb2 import (
    BytesList,
    Example,
    Feature,
    FeatureList,
    FeatureLists,
    Features,
    FloatList,
    Int64List,
    SequenceExample,
)
from flowgraph.core.protos.full_type_pb2 import FullTypeDef, FullTypeId
from flowgraph.core.protos.function_pb2 import FunctionDef, FunctionDefLibrary, GradientDef
from flowgraph.core.protos.graph_debug_info_pb2 import GraphDebugInfo
from flowgraph.core.protos.graph_pb2 import GraphDef
from flowgraph.core.protos.meta_graph_pb2 import (
    AssetFileDef,
    CollectionDef,
    MetaGraphDef,
    SignatureDef,
    TensorInfo,
)
from flowgraph.core.protos.named_tensor_pb2 import NamedTensorProto
from flowgraph.core.protos.node_def_pb2 import NodeDef
from flowgraph.core.protos.op_def_pb2 import OpDef, OpDeprecation, OpList
from flowgraph.core.protos.queue_runner_pb2 import QueueRunnerDef
from flowgraph.core.protos.reader_base_pb2 import ReaderBaseState
from flowgraph.core.protos.resource_handle_pb2 import ResourceHandleProto
from flowgraph.core.protos.rewriter_config_pb2 import RewriterConfig
from flowgraph.core.protos.saved_model_pb2 import SavedModel
from flowgraph.core.protos.saved_object_graph_pb2 import SavedObjectGraph
from flowgraph.core.protos.saved_tensor_slice_pb2 import (
    SavedSlice,
    SavedSliceMeta,
    SavedTensorSliceMeta,
    SavedTensorSlices,
)
from flowgraph.core.protos.saver_pb2 import CheckpointState, SaverDef
from flowgraph.core.protos.step_stats_pb2 import (
    AllocationRecord,
    AllocatorMemoryUsed,
    DeviceStepStats,
    MemoryStats,
    NodeExecStats,
    NodeOutput,
    StepStats,
)
from flowgraph.core.protos.struct_pb2 import StructuredValue
from flowgraph.core.protos.summary_pb2 import (
    DataClass,
    HistogramProto,
    Summary,
    SummaryMetadata,
)
from flowgraph.core.protos.tensor_bundle_pb2 import (
    BundleEntryProto,
    BundleHeaderProto,
    TensorSliceProto,
)
from flowgraph.core.protos.tensor_description_pb2 import AllocationDescription, TensorDescription
from flowgraph.core.protos.tensor_pb2 import TensorProto, VariantTensorDataProto
from flowgraph.core.protos.tensor_shape_pb2 import TensorShapeProto
from flowgraph.core.protos.tensorflow_server_pb2 import ServerDef
from flowgraph.core.protos.trackable_object_graph_pb2 import TrackableObjectGraph
from flowgraph.core.protos.types_pb2 import DataType
from flowgraph.core.protos.variable_pb2 import SaveSliceInfoDef, VariableDef
from flowgraph.core.protos.versions_pb2 import VersionDef

__all__ = [
    "AllocationDescription",
    "AllocationRecord",
    "AllocatorMemoryUsed",
    "AssetFileDef",
    "AttrValue",
    "BundleEntryProto",
    "BundleHeaderProto",
    "BytesList",
    "CallableOptions",
    "CheckpointState",
    "ClusterDef",
    "CollectionDef",
    "ConfigProto",
    "CostGraphDef",
    "DataClass",
    "DataType",
    "DebugOptions",
    "DebugTensorWatch",
    "DeviceAttributes",
    "DeviceLocality",
    "DeviceStepStats",
    "Event",
    "Example",
    "Feature",
    "FeatureList",
    "FeatureLists",
    "Features",
    "FloatList",
    "FullTypeDef",
    "FullTypeId",
    "FunctionDef",
    "FunctionDefLibrary",
    "GPUOptions",
    "GradientDef",
    "GraphDebugInfo",
    "GraphDef",
    "GraphOptions",
    "HistogramProto",
    "Int64List",
    "JobDef",
    "LogMessage",
    "MemoryStats",
    "MetaGraphDef",
    "NameAttrList",
    "NamedTensorProto",
    "NodeDef",
    "NodeExecStats",
    "NodeOutput",
    "OpDef",
    "OpDeprecation",
    "OpList",
    "OptimizerOptions",
    "QueueRunnerDef",
    "RPCOptions",
    "ReaderBaseState",
    "ResourceHandleProto",
    "RewriterConfig",
    "RunMetadata",
    "RunOptions",
    "SaveSliceInfoDef",
    "SavedModel",
    "SavedObjectGraph",
    "SavedSlice",
    "SavedSliceMeta",
    "SavedTensorSliceMeta",
    "SavedTensorSlices",
    "SaverDef",
    "SequenceExample",
    "ServerDef",
    "SessionLog",
    "SessionMetadata",
    "SignatureDef",
    "SourceMetadata",
    "StepStats",
    "StructuredValue",
    "Summary",
    "SummaryMetadata",
    "TaggedRunMetadata",
    "TensorConnection",
    "TensorDescription",
    "TensorInfo",
    "TensorProto",
    "TensorShapeProto",
    "TensorSliceProto",
    "ThreadPoolOptionProto",
    "TrackableObjectGraph",
    "VariableDef",
    "VariantTensorDataProto",
    "VersionDef",
]
