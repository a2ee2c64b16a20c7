"""tf.train.SyncReplicasOptimizer: synchronous data parallelism (whitepaper §7, Figure 7 bottom).

Between-graph replication: every worker builds the same model and wraps its optimizer in this
class. The graph it adds (TF 1.15's layout, node for node):

- one gradient accumulator per trainable variable, on the variable's device, shared by all
  replicas through `shared_name = "<variable name>/grad_accum"`. A replica pushes its gradient
  tagged with its `local_step`; the accumulator drops it if that step is older than the
  accumulator's global step (a stale gradient, e.g. a straggler's, §7: "backup workers");
- `sync_rep_local_step`, a local variable per replica, colocated with the replica's ops: the
  global step at which the replica read the variables;
- `sync_token_q`, a FIFO queue on the global step's device. The chief's queue runner runs the
  *sync op*: take the mean of `replicas_to_aggregate` gradients from every accumulator, apply it
  with the wrapped optimizer (which bumps the global step), then enqueue
  `max(total_num_replicas, replicas_to_aggregate)` tokens holding the new global step.

A replica's train op is: push all gradients, dequeue a token (the barrier: it waits until the
chief applied an update), copy the token into `local_step`. With `replicas_to_aggregate <
total_num_replicas` the update goes ahead once the fastest replicas' gradients are in; the
others' gradients carry an old `local_step` and are dropped (backup workers). With more
replicas to aggregate than replicas, each replica computes several batches per update.

Example (every worker):
    opt = tf.train.SyncReplicasOptimizer(tf.train.GradientDescentOptimizer(0.1),
                                         replicas_to_aggregate=2, total_num_replicas=3)
    train_op = opt.minimize(loss, global_step=global_step)
    hook = opt.make_session_run_hook(is_chief=(task_index == 0))
    with tf.train.MonitoredTrainingSession(master=server.target, is_chief=...,
                                           hooks=[hook]) as sess:
        while not sess.should_stop():
            sess.run(train_op)
"""

from __future__ import annotations

from flowgraph.framework.graph import GraphKeys
from flowgraph.framework.indexed_slices import IndexedSlices
from flowgraph.framework.operation import Tensor
from flowgraph.ops import array as array_ops
from flowgraph.ops import variable_collections, variable_ops, variables
from flowgraph.ops.accumulators import ConditionalAccumulator, SparseConditionalAccumulator
from flowgraph.ops.queues import FIFOQueue
from flowgraph.platform import tf_logging as logging
from flowgraph.train import queue_runner, session_manager
from flowgraph.train.optimizer import Optimizer
from flowgraph.train.session_run_hook import SessionRunHook

__all__ = ["SyncReplicasOptimizer"]


class SyncReplicasOptimizer(Optimizer):
    """Aggregates gradients from replicas and applies their mean once (see the module docstring).

    Args:
        opt: the optimizer that applies the aggregated gradients.
        replicas_to_aggregate: gradients averaged per update.
        total_num_replicas: workers in the job (default `replicas_to_aggregate`); more than
            `replicas_to_aggregate` makes the rest backup workers whose gradients are dropped.
        variable_averages: an ExponentialMovingAverage applied after each update, to
            `variables_to_average`.
        use_locking, name: as for every Optimizer.
    """

    def __init__(
        self,
        opt,
        replicas_to_aggregate,
        total_num_replicas=None,
        variable_averages=None,
        variables_to_average=None,
        use_locking=False,
        name="sync_replicas",
    ):
        if total_num_replicas is None:
            total_num_replicas = replicas_to_aggregate
        super().__init__(use_locking, name)
        logging.info(
            "SyncReplicasV2: replicas_to_aggregate=%s; total_num_replicas=%s",
            replicas_to_aggregate,
            total_num_replicas,
        )
        self._opt = opt
        self._replicas_to_aggregate = replicas_to_aggregate
        self._gradients_applied = False
        self._variable_averages = variable_averages
        self._variables_to_average = variables_to_average
        self._total_num_replicas = total_num_replicas
        self._tokens_per_step = max(total_num_replicas, replicas_to_aggregate)
        self._global_step = None
        self._sync_token_queue = None
        self._chief_queue_runner = None
        self._accumulator_list = []  # (accumulator, device of its variable)
        self._local_step = None
        self.local_step_init_op = None
        self.chief_init_op = None
        self.ready_for_local_init_op = None

    def compute_gradients(self, *args, **kwargs):
        """The wrapped optimizer's gradients: per replica, so that a replica may clip its own
        gradients before they are averaged (a global norm over the mean would let one replica's
        huge gradient hurt the others)."""
        return self._opt.compute_gradients(*args, **kwargs)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """Builds the accumulators, the token queue and the chief's sync op; returns this
        replica's train op (push gradients, wait for a token, record it as the local step)."""
        del name  # TF 1.15 ignores it too: the ops are named after the optimizer
        grads_and_vars = list(grads_and_vars)
        if not grads_and_vars:
            raise ValueError("Must supply at least one variable")
        if global_step is None:
            raise ValueError("Global step is required to check staleness")
        self._global_step = global_step
        graph = global_step.op.graph
        with graph.as_default():
            self._make_local_step(graph, global_step)
            with graph.name_scope(self._name):
                train_ops, aggregated, var_list = self._accumulate(graph, grads_and_vars)
                with graph.device(global_step.device), graph.name_scope(""):
                    train_op = self._build_sync(graph, global_step, train_ops, aggregated, var_list)
                chief_init_ops = [self.local_step_init_op]
                for accum, device in self._accumulator_list:
                    with graph.device(device):
                        chief_init_ops.append(
                            accum.set_global_step(global_step, name="SetGlobalStep")
                        )
                self.chief_init_op = array_ops.group(*chief_init_ops)
        self._gradients_applied = True
        return train_op

    def _build_sync(self, graph, global_step, train_ops, aggregated, var_list):
        """The wrapped optimizer's update, the token queue and the chief's queue runner on the
        global step's device; returns the replica's train op."""
        update_op = self._opt.apply_gradients(zip(aggregated, var_list), global_step)
        self._sync_token_queue = FIFOQueue(
            -1,
            global_step.dtype.base_dtype,
            shapes=(),
            name="sync_token_q",
            shared_name="sync_token_q",
        )
        with graph.control_dependencies(train_ops):
            token = self._sync_token_queue.dequeue()
        train_op = variable_ops.assign(self._local_step, token)
        with graph.control_dependencies([update_op]):
            tokens = array_ops.fill([self._tokens_per_step], global_step)
            sync_op = self._sync_token_queue.enqueue_many((tokens,))
        if self._variable_averages is not None:
            with graph.control_dependencies([sync_op]):
                sync_op = self._variable_averages.apply(self._variables_to_average)
        self._chief_queue_runner = queue_runner.QueueRunner(self._sync_token_queue, [sync_op])
        return train_op

    def _make_local_step(self, graph, global_step):
        """`sync_rep_local_step` lives with this replica's ops, not on a parameter server: it is
        colocated with a NoOp made under the caller's device scope."""
        local_anchor = array_ops.no_op()
        with graph.colocate_with(local_anchor):
            self._local_step = variables.Variable(
                initial_value=0,
                trainable=False,
                collections=[GraphKeys.LOCAL_VARIABLES],
                dtype=global_step.dtype.base_dtype,
                name="sync_rep_local_step",
            )
        self.local_step_init_op = variable_ops.assign(self._local_step, global_step)
        self.ready_for_local_init_op = variable_collections.report_uninitialized_variables(
            variable_collections.global_variables()
        )

    def _accumulate(self, graph, grads_and_vars):
        """One shared accumulator per variable on its device: (apply ops, means, variables)."""
        train_ops, aggregated, var_list = [], [], []
        for grad, var in grads_and_vars:
            var_list.append(var)
            with graph.device(var.device):
                if grad is None:
                    aggregated.append(None)  # passes through, as in TF
                    continue
                if isinstance(grad, Tensor):
                    accum = ConditionalAccumulator(
                        grad.dtype, shape=var.get_shape(), shared_name=var.name + "/grad_accum"
                    )
                    train_ops.append(accum.apply_grad(grad, local_step=self._local_step))
                    aggregated.append(accum.take_grad(self._replicas_to_aggregate))
                elif isinstance(grad, IndexedSlices):
                    accum = SparseConditionalAccumulator(
                        grad.dtype, shape=(), shared_name=var.name + "/grad_accum"
                    )
                    train_ops.append(
                        accum.apply_indexed_slices_grad(grad, local_step=self._local_step)
                    )
                    aggregated.append(accum.take_indexed_slices_grad(self._replicas_to_aggregate))
                else:
                    raise ValueError(f"Unknown grad type! {type(grad).__name__}")
                self._accumulator_list.append((accum, var.device))
        return train_ops, aggregated, var_list

    def get_chief_queue_runner(self):
        """The QueueRunner that runs the sync op (aggregate, apply, bump the global step, put
        tokens) on the chief. Only after apply_gradients()."""
        if not self._gradients_applied:
            raise ValueError("Should be called after apply_gradients().")
        return self._chief_queue_runner

    def get_slot(self, *args, **kwargs):
        return self._opt.get_slot(*args, **kwargs)

    def variables(self):
        """The wrapped optimizer's variables (not the local step)."""
        return self._opt.variables()

    def get_slot_names(self, *args, **kwargs):
        return self._opt.get_slot_names(*args, **kwargs)

    def get_init_tokens_op(self, num_tokens=-1):
        """The op that puts the first tokens (holding the global step) in the token queue, run
        once by the chief. -1 means `replicas_to_aggregate`; fewer than
        `replicas_to_aggregate - total_num_replicas` could never finish the first step."""
        if not self._gradients_applied:
            raise ValueError("get_init_tokens_op() should be called after apply_gradients().")
        tokens_needed = self._replicas_to_aggregate - self._total_num_replicas
        if num_tokens == -1:
            num_tokens = self._replicas_to_aggregate
        elif num_tokens < tokens_needed:
            raise ValueError(
                f"Too few tokens to finish the first step: {num_tokens} (given) vs "
                f"{tokens_needed} (needed)"
            )
        graph = self._global_step.op.graph
        with graph.as_default(), graph.device(self._global_step.device), graph.name_scope(""):
            if num_tokens > 0:
                tokens = array_ops.fill([num_tokens], self._global_step)
                return self._sync_token_queue.enqueue_many((tokens,))
            return array_ops.no_op(name="no_init_tokens")

    def make_session_run_hook(self, is_chief, num_tokens=-1):
        """A hook that runs the local-step (and on the chief the accumulators') init op once the
        model is ready, puts the initial tokens and starts the chief's queue runner."""
        return _SyncReplicasOptimizerHook(self, is_chief, num_tokens)


class _SyncReplicasOptimizerHook(SessionRunHook):
    """Initializes a replica of a SyncReplicasOptimizer when its session is created."""

    def __init__(self, sync_optimizer, is_chief, num_tokens):
        self._sync_optimizer = sync_optimizer
        self._is_chief = is_chief
        self._num_tokens = num_tokens

    def begin(self):
        opt = self._sync_optimizer
        if not opt._gradients_applied:
            raise ValueError(
                "SyncReplicasOptimizer.apply_gradient should be called before using the hook."
            )
        self._ready_for_local_init_op = opt.ready_for_local_init_op
        if self._is_chief:
            self._local_init_op = opt.chief_init_op
            self._q_runner = opt.get_chief_queue_runner()
            self._init_tokens_op = opt.get_init_tokens_op(self._num_tokens)
        else:
            self._local_init_op = opt.local_step_init_op
            self._q_runner = None
            self._init_tokens_op = None

    def after_create_session(self, session, coord):
        """Runs the init ops once the global variables exist; the chief starts its runner."""
        ready, msg = session_manager._ready(
            self._ready_for_local_init_op,
            session,
            "Model is not ready for SyncReplicasOptimizer local init.",
        )
        if not ready:
            raise RuntimeError(
                "Init operations did not make model ready for SyncReplicasOptimizer "
                f"local_init. Init op: {self._local_init_op.name}, error: {msg}"
            )
        session.run(self._local_init_op)
        if self._init_tokens_op is not None:
            session.run(self._init_tokens_op)
        if self._q_runner is not None:
            self._q_runner.create_threads(session, coord=coord, daemon=True, start=True)
