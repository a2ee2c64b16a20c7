"""The tf.train namespace: optimizers, learning-rate schedules, moving averages and the global
step (whitepaper §4.1: training is the graph of gradients plus update ops).

Each name comes from the module that owns it:
    optimizer.py            Optimizer (compute_gradients / apply_gradients / minimize, slots)
    optimizers.py           GradientDescent, Momentum, Adagrad, Adadelta, RMSProp
    adam.py, ftrl.py        AdamOptimizer, FtrlOptimizer
    training_ops.py         the fused update ops (ApplyMomentum, SparseApplyAdagrad, ...)
    slot_creator.py         per-variable optimizer state
    learning_rate_decay.py  exponential_decay, piecewise_constant, ...
    moving_averages.py      ExponentialMovingAverage
    training_util.py        get_global_step, create_global_step, ...
    coordinator.py          Coordinator, LooperThread (threads that stop together)
    queue_runner.py         QueueRunner, add_queue_runner, start_queue_runners (§4.6)
    input.py                input producers and batch/shuffle_batch (§4.5)
    saver.py                Saver (checkpoints as SaveV2/RestoreV2 ops, whitepaper §3.3)
    checkpoint_management.py, checkpoint_utils.py   the `checkpoint` file, readers
    meta_graph.py           export_meta_graph / import_meta_graph
    session_run_hook.py     the hook interface of training loops; hooked_session.py runs hooks
    basic_session_run_hooks.py  StopAtStepHook, LoggingTensorHook, NanTensorHook, ProfilerHook
                            (§9.2), ...; saving_hooks.py: CheckpointSaverHook, SummarySaverHook,
                            StepCounterHook; second_or_step_timer.py: SecondOrStepTimer
    scaffold.py, session_manager.py  Scaffold, SessionManager (initialize or restore a model)
    monitored_session.py    MonitoredSession, MonitoredTrainingSession, session creators
    supervisor.py           Supervisor (the older training-loop manager)
    cluster_spec.py         ClusterSpec (the tasks of a cluster, §3.3)
    server.py               Server (one task's master and worker on a gRPC port, §3.3)
    device_setter.py        replica_device_setter (parameter servers, §7)
    sync_replicas_optimizer.py  SyncReplicasOptimizer (synchronous data parallelism, §7)
"""

from flowgraph.core.protos import (
    BytesList,
    CheckpointState,
    Example,
    Feature,
    FeatureList,
    FeatureLists,
    Features,
    FloatList,
    Int64List,
    SaverDef,
    SequenceExample,
)
from flowgraph.summary import summary_iterator  # TF1 exports it here as well
from flowgraph.train import queue_runner, slot_creator, training_ops
from flowgraph.train.adam import AdamOptimizer
from flowgraph.train.basic_session_run_hooks import (
    CheckpointSaverHook,
    CheckpointSaverListener,
    FeedFnHook,
    FinalOpsHook,
    GlobalStepWaiterHook,
    LoggingTensorHook,
    NanLossDuringTrainingError,
    NanTensorHook,
    ProfilerHook,
    SecondOrStepTimer,
    StepCounterHook,
    StopAtStepHook,
    SummarySaverHook,
)
from flowgraph.train.checkpoint_management import (
    checkpoint_exists,
    generate_checkpoint_state_proto,
    get_checkpoint_mtimes,
    get_checkpoint_state,
    latest_checkpoint,
    remove_checkpoint,
    update_checkpoint_state,
)
from flowgraph.train.checkpoint_utils import (
    CheckpointReader,
    NewCheckpointReader,
    init_from_checkpoint,
    list_variables,
    load_checkpoint,
    load_variable,
)
from flowgraph.train.coordinator import Coordinator, LooperThread
from flowgraph.train.ftrl import FtrlOptimizer
from flowgraph.train.graph_io import write_graph
from flowgraph.train.input import (
    batch,
    batch_join,
    input_producer,
    limit_epochs,
    maybe_batch,
    maybe_batch_join,
    maybe_shuffle_batch,
    maybe_shuffle_batch_join,
    range_input_producer,
    shuffle_batch,
    shuffle_batch_join,
    slice_input_producer,
    string_input_producer,
)
from flowgraph.train.learning_rate_decay import (
    cosine_decay,
    cosine_decay_restarts,
    exponential_decay,
    inverse_time_decay,
    linear_cosine_decay,
    natural_exp_decay,
    noisy_linear_cosine_decay,
    piecewise_constant,
    piecewise_constant_decay,
    polynomial_decay,
)
from flowgraph.train.loops import (
    basic_train_loop,
    checkpoints_iterator,
    match_filenames_once,
    wait_for_new_checkpoint,
)
from flowgraph.train.meta_graph import export_meta_graph, import_meta_graph
from flowgraph.train.monitored_session import (
    ChiefSessionCreator,
    MonitoredSession,
    MonitoredTrainingSession,
    SessionCreator,
    SingularMonitoredSession,
    WorkerSessionCreator,
)
from flowgraph.train.moving_averages import ExponentialMovingAverage, assign_moving_average
from flowgraph.train.optimizer import Optimizer
from flowgraph.train.optimizers import (
    AdadeltaOptimizer,
    AdagradOptimizer,
    GradientDescentOptimizer,
    MomentumOptimizer,
    RMSPropOptimizer,
)
from flowgraph.train.proximal import ProximalAdagradOptimizer, ProximalGradientDescentOptimizer
from flowgraph.train.queue_runner import QueueRunner, add_queue_runner, start_queue_runners
from flowgraph.train.saver import Saver
from flowgraph.train.scaffold import Scaffold
from flowgraph.train.session_manager import SessionManager
from flowgraph.train.session_run_hook import (
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
)
from flowgraph.train.supervisor import Supervisor
from flowgraph.train.training_util import (
    assert_global_step,
    create_global_step,
    get_global_step,
    get_or_create_global_step,
    global_step,
)

__all__ = [
    "AdadeltaOptimizer",
    "AdagradOptimizer",
    "AdamOptimizer",
    "ExponentialMovingAverage",
    "FtrlOptimizer",
    "GradientDescentOptimizer",
    "MomentumOptimizer",
    "Optimizer",
    "ProximalAdagradOptimizer",
    "ProximalGradientDescentOptimizer",
    "RMSPropOptimizer",
    "assert_global_step",
    "assign_moving_average",
    "basic_train_loop",
    "checkpoints_iterator",
    "cosine_decay",
    "cosine_decay_restarts",
    "create_global_step",
    "exponential_decay",
    "get_global_step",
    "get_or_create_global_step",
    "global_step",
    "inverse_time_decay",
    "linear_cosine_decay",
    "match_filenames_once",
    "natural_exp_decay",
    "noisy_linear_cosine_decay",
    "piecewise_constant",
    "piecewise_constant_decay",
    "polynomial_decay",
    "slot_creator",
    "training_ops",
    "wait_for_new_checkpoint",
]
__all__ += [
    "BytesList",
    "Coordinator",
    "Example",
    "Feature",
    "FeatureList",
    "FeatureLists",
    "Features",
    "FloatList",
    "Int64List",
    "LooperThread",
    "QueueRunner",
    "SequenceExample",
    "add_queue_runner",
    "batch",
    "batch_join",
    "input_producer",
    "limit_epochs",
    "maybe_batch",
    "maybe_batch_join",
    "maybe_shuffle_batch",
    "maybe_shuffle_batch_join",
    "queue_runner",
    "range_input_producer",
    "shuffle_batch",
    "shuffle_batch_join",
    "slice_input_producer",
    "start_queue_runners",
    "string_input_producer",
]
__all__ += [
    "CheckpointReader",
    "CheckpointState",
    "NewCheckpointReader",
    "Saver",
    "SaverDef",
    "checkpoint_exists",
    "export_meta_graph",
    "generate_checkpoint_state_proto",
    "get_checkpoint_mtimes",
    "get_checkpoint_state",
    "import_meta_graph",
    "init_from_checkpoint",
    "latest_checkpoint",
    "list_variables",
    "load_checkpoint",
    "load_variable",
    "remove_checkpoint",
    "update_checkpoint_state",
    "write_graph",
]
__all__ += ["summary_iterator"]
__all__ += ["ProfilerHook", "SecondOrStepTimer", "SessionRunArgs", "SessionRunContext"]
__all__ += ["SessionRunHook", "SessionRunValues"]

# Clusters (whitepaper §3.3) and between-graph replication (§7).
from flowgraph.core.protos import ClusterDef, JobDef, ServerDef
from flowgraph.train.cluster_spec import ClusterSpec
from flowgraph.train.device_setter import replica_device_setter
from flowgraph.train.server import Server

__all__ += ["ClusterDef", "ClusterSpec", "JobDef", "Server", "ServerDef", "replica_device_setter"]
__all__ += ["CheckpointSaverHook", "CheckpointSaverListener", "FeedFnHook", "FinalOpsHook"]
__all__ += ["GlobalStepWaiterHook", "LoggingTensorHook", "NanLossDuringTrainingError"]
__all__ += ["NanTensorHook", "StepCounterHook", "StopAtStepHook", "SummarySaverHook"]
__all__ += ["ChiefSessionCreator", "MonitoredSession", "MonitoredTrainingSession", "Scaffold"]
__all__ += ["SessionCreator", "SessionManager", "SingularMonitoredSession", "WorkerSessionCreator"]
__all__ += ["Supervisor"]

# Synchronous data parallelism (§7).
from flowgraph.train.sync_replicas_optimizer import SyncReplicasOptimizer

__all__ += ["SyncReplicasOptimizer"]
