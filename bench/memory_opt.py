"""Peak memory and step time of training steps with the memory optimizer off and on (whitepaper
§4.1, issue 13: target at least 30% less peak memory at no more than 25% more step time).

    python bench/memory_opt.py [--steps 20]

Workloads: the LSTM example (flowgraph/examples/lstm_lm.py with its default sizes: batch 16,
32 unrolled steps, 128 units, Adam on clipped gradients; one window of the bundled text), W4
(bench/workloads.py: the 784-1024-1024-10 MLP, SGD, batch 256) and W5 (its LeNet-like CNN,
SGD, batch 64). Configurations are
RewriterConfig.memory_optimization levels: `off` NO_MEM_OPT, `default` DEFAULT_MEM_OPT,
`heuristics` HEURISTICS (adds recomputation of cheap activations). Peak is the step's peak
bytes from its StepStats allocation records (tracing.peak_memory, one traced step); times are the
median and the best of `--steps` untraced steps, the configurations' sessions taking turns so
that load on the machine hits them alike; the ratio is of the best times, which other processes
on a shared machine disturb least.

What to expect: the LSTM's peak is its gradient sums (tf.gradients adds the kernel's 32
per-step contributions with one AddN, 32 x 288 KiB alive at once), which DEFAULT_MEM_OPT
accumulates as they come. W4's peak was the gradient of the second layer's 1024x1024 weights
(4 MiB) while its inputs (relu output and incoming gradient, 1 MiB each) and the layer's input
gradient (1 MiB) are alive; DEFAULT_MEM_OPT fuses each weight gradient into its
ApplyGradientDescent (passes/weight_updates.py), which accumulates it into the weights with
gemm, so the gradient is never materialized and the peak is the activations (7 -> 4 MiB).
W5's dense layers are fused too (fc1's 3136x1024 gradient is 12 MiB; 25 -> 18 MiB); what
remains is its first convolution's activations and their gradients (6 MiB each) and the
filter gradients, which come from Conv2DBackpropFilter, not a MatMul.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import workloads

import flowgraph as tf
from flowgraph.core.protos import RewriterConfig
from flowgraph.examples import lstm_lm, text_data
from flowgraph.runtime.tracing import peak_memory

LEVELS = {
    "off": RewriterConfig.NO_MEM_OPT,
    "default": RewriterConfig.DEFAULT_MEM_OPT,
    "heuristics": RewriterConfig.HEURISTICS,
}


def lstm_step():
    """(graph, fetches, feed, init) of one training step of the LSTM example."""
    args = lstm_lm._parse([])
    text = text_data.characters()
    vocab = text_data.vocabulary(text)
    rows = lstm_lm.streams(text_data.as_ids(text, vocab), args.batch_size)
    x, y = next(lstm_lm.windows(rows, args.num_steps))
    g = tf.Graph()
    with g.as_default():
        tf.set_random_seed(args.seed)
        model = lstm_lm.Model(len(vocab), args.num_steps, args)
        targets, loss, train_op, _ = lstm_lm.build_training(model, args)
        init = tf.global_variables_initializer()
    return g, [train_op, loss], {model.inputs: x, targets: y}, init


def sgd_step(model, input_shape):
    """(graph, fetches, feed, init) of an SGD step of bench/workloads.py's `model` loss."""
    g = tf.Graph()
    with g.as_default():
        x, labels, loss = model(tf)
        train = tf.train.GradientDescentOptimizer(workloads.LEARNING_RATE).minimize(loss)
        init = tf.global_variables_initializer()
    xs, ys = workloads.batch(input_shape, seed=0)
    return g, [train, loss], {x: xs, labels: ys}, init


def w4_step():
    return sgd_step(workloads.mlp_loss, (workloads.MLP_BATCH, workloads.MLP_SIZES[0]))


def w5_step():
    return sgd_step(workloads.cnn_loss, (workloads.CNN_BATCH, 28, 28, 1))


WORKLOADS = {"LSTM example": lstm_step, "W4 MLP": w4_step, "W5 LeNet": w5_step}


def measure(build, steps: int) -> dict:
    """{level name: (peak bytes, median and best seconds per step)}."""
    g, fetches, feed, init = build()
    sessions = {}
    for name, level in LEVELS.items():
        config = tf.ConfigProto()
        config.graph_options.rewrite_options.memory_optimization = level
        s = tf.Session(graph=g, config=config)
        s.run(init)
        s.run(fetches, feed)  # plans the signature
        md = tf.RunMetadata()
        opts = tf.RunOptions(trace_level=tf.RunOptions.FULL_TRACE)
        s.run(fetches, feed, options=opts, run_metadata=md)
        sessions[name] = (s, sum(peak_memory(md).values()))
    times = {name: [] for name in LEVELS}
    for _ in range(steps):
        for name, (s, _) in sessions.items():
            t0 = time.perf_counter()
            s.run(fetches, feed)
            times[name].append(time.perf_counter() - t0)
    out = {}
    for name, (s, peak) in sessions.items():
        s.close()
        out[name] = (peak, statistics.median(times[name]), min(times[name]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    header = f"{'workload':<14}{'memory_optimization':<21}{'peak MiB':>9}{'vs off':>8}"
    header += f"{'ms/step':>9}{'best':>8}{'vs off':>8}"
    print(header)
    print("-" * len(header))
    for workload, build in WORKLOADS.items():
        results = measure(build, args.steps)
        peak_off, _, best_off = results["off"]
        for name, (peak, median, best) in results.items():
            print(
                f"{workload:<14}{name:<21}{peak / 2**20:>9.2f}{peak / peak_off - 1:>+8.0%}"
                f"{median * 1e3:>9.2f}{best * 1e3:>8.2f}{best / best_off - 1:>+8.0%}"
            )


if __name__ == "__main__":
    main()
