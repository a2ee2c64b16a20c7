"""The paths that keep a tf.data pipeline's cost off the training step (issue 11, bench I2d):
the dataset pool's hand-off and IteratorGetNext's take of a prefetched element."""

import pathlib
import threading

import numpy as np
import pytest
from dataset_helpers import drain

import flowgraph as tf
from flowgraph.kernels.cpu.dataset_base import BackgroundPool, Iterator, drive

Dataset = tf.data.Dataset


def test_pool_runs_every_task_when_tasks_outnumber_workers():
    pool = BackgroundPool(2, "test_pool")
    done = threading.Semaphore(0)
    seen = []
    lock = threading.Lock()

    def task(i):
        with lock:
            seen.append(i)
        done.release()

    for i in range(50):
        pool.submit(lambda i=i: task(i))
    for _ in range(50):
        assert done.acquire(timeout=30)
    assert sorted(seen) == list(range(50))
    assert pool._workers <= 2


def test_pool_keeps_running_after_a_task_raises(monkeypatch):
    monkeypatch.setattr(threading, "excepthook", lambda args: None)  # the expected report
    pool = BackgroundPool(1, "test_pool")
    done = threading.Event()

    def boom():
        raise RuntimeError("task failure")

    pool.submit(boom)
    pool.submit(done.set)
    assert done.wait(30)


def test_prefetched_elements_errors_and_end_through_get_next():
    def check(v):
        if v == 3:
            raise ValueError("three")
        return v

    ds = Dataset.range(6).map(lambda v: tf.py_func(check, [v], tf.int64)).prefetch(4)
    nxt = ds.make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        got = [int(sess.run(nxt)) for _ in range(3)]
        with pytest.raises(tf.errors.InvalidArgumentError):
            sess.run(nxt)  # the buffered error, in its place
        got += [int(sess.run(nxt)) for _ in range(2)]
        for _ in range(2):  # the end is the end every time
            with pytest.raises(tf.errors.OutOfRangeError):
                sess.run(nxt)
    assert got == [0, 1, 2, 4, 5]
    assert [int(v) for v in drain(Dataset.range(5).prefetch(2))] == list(range(5))


class _ManualPool:
    """A pool whose tasks run when the test says (the prefetch's restarts, counted)."""

    def __init__(self):
        self.tasks = []

    def submit(self, fn):
        self.tasks.append(fn)

    def run(self):
        while self.tasks:
            self.tasks.pop(0)()


class _Counting(Iterator):
    def __init__(self):
        self.made = 0

    async def get_next(self):
        self.made += 1
        return (np.int64(self.made),)


def test_prefetch_refills_at_its_low_mark_and_keeps_the_order(monkeypatch):
    from flowgraph.kernels.cpu import dataset_parallel

    pool = _ManualPool()
    monkeypatch.setattr(dataset_parallel, "background_pool", lambda: pool)
    source = _Counting()
    it = dataset_parallel._PrefetchIterator(source, 4)  # low mark (4 - 1) // 2 = 1
    got = []
    assert drive(it.get_next(), lambda e, err: got.append(int(e[0]))) is None  # it waits
    assert len(pool.tasks) == 1  # one producer started
    pool.run()
    assert got == [1] and source.made == 5  # the waiter served, then filled to the size
    for want_tasks in (0, 0, 1):  # 3 and 2 left: no restart; 1 left: restarted
        element, error = it.poll()
        got.append(int(element[0]))
        assert error is None and len(pool.tasks) == want_tasks
    pool.run()
    assert source.made == 8 and len(it.buffer) == 4
    got += [int(it.poll()[0][0]) for _ in range(4)]
    assert got == list(range(1, 9))
    two = dataset_parallel._PrefetchIterator(_Counting(), 2)  # low mark 0
    drive(two.get_next(), lambda e, err: None)
    pool.run()
    assert len(two.buffer) == 2
    assert two.poll() is not None and not pool.tasks  # 1 left: not yet
    assert two.poll() is not None and len(pool.tasks) == 1  # empty: restarted


# -- packed records (dataset_packed.py) and parse-only maps (dataset_parse.py) ---------------
FEATURES = {"x": tf.FixedLenFeature([3], tf.float32), "y": tf.FixedLenFeature([], tf.int64)}


def _example(i: int) -> bytes:
    ex = tf.train.Example()
    ex.features.feature["x"].float_list.value.extend([i, i / 2, -i])
    ex.features.feature["y"].int64_list.value.append(i * 1000003)
    return ex.SerializeToString()


def _files(tmp_path, counts, bad=None) -> list:
    """TFRecord files of examples numbered on across files; record `bad` is not an Example."""
    paths, i = [], 0
    for f, count in enumerate(counts):
        paths.append(str(tmp_path / f"ex{f}.tfrecord"))
        with tf.python_io.TFRecordWriter(paths[-1]) as w:
            for _ in range(count):
                w.write(b"\xff\x01not an example" if i == bad else _example(i))
                i += 1
    return paths


def _outcomes(ds, limit=200, ends=True) -> list:
    """Every element or error (its class) until the end, flattened to lists (the first
    `limit` if not `ends`)."""
    nxt = ds.make_one_shot_iterator().get_next()
    out = []
    with tf.Session() as sess:
        for _ in range(limit):
            try:
                value = sess.run(nxt)
            except tf.errors.OutOfRangeError:
                return out
            except tf.errors.OpError as e:
                out.append(type(e).__name__)
                continue
            out.append([np.asarray(v).tolist() for v in tf.nest.flatten(value)])
    assert not ends, "the dataset did not end"
    return out


def _parse(r):
    return tf.parse_example(r, FEATURES)


def _parse_one(r):
    return tf.parse_single_example(r, FEATURES)


def _same(r):
    return r


@pytest.fixture
def small_reads(monkeypatch):
    """Read buffers of a few records, so that records straddle them (read_many's path), cuts
    of fewer records than a buffer holds, and a small arena, so that shuffles compact it
    often."""
    from flowgraph.core import records
    from flowgraph.kernels.cpu import dataset_packed, dataset_sources

    monkeypatch.setattr(records, "_READ_AHEAD", 256)
    monkeypatch.setattr(dataset_sources, "_CUT_AHEAD", 2)
    monkeypatch.setattr(dataset_packed, "_MIN_ARENA", 1024)


@pytest.mark.parametrize("reads", ["default", "small"])
def test_shuffled_batches_parsed_as_packed_records_equal_the_element_path(tmp_path, request, reads):
    if reads == "small":
        request.getfixturevalue("small_reads")
    paths = _files(tmp_path, [70, 45])

    def make(fast, drop=False):
        ds = tf.data.TFRecordDataset(paths).shuffle(37, seed=3).repeat(2)
        ds = ds if fast else ds.map(_same)  # an identity map: elements one by one
        return ds.batch(16, drop_remainder=drop).map(_parse)

    for drop in (True, False):
        fast, slow = _outcomes(make(True, drop)), _outcomes(make(False, drop))
        assert fast == slow
        assert len(fast) == (230 // 16 if drop else 230 // 16 + 1)
    ys = sorted(y for _, batch in fast for y in batch)
    assert ys == sorted(i * 1000003 for i in list(range(115)) * 2)


def test_parse_single_example_before_a_batch_parses_runs(tmp_path, small_reads):
    paths = _files(tmp_path, [30, 23])
    fast = _outcomes(tf.data.TFRecordDataset(paths).map(_parse_one).batch(8))
    slow = _outcomes(tf.data.TFRecordDataset(paths).map(_parse_one).map(_same).batch(8))
    assert fast == slow
    assert [x for batch in fast for x in batch[0]] == [[i, i / 2, -i] for i in range(53)]


@pytest.mark.parametrize("parse", ["batch", "single"])
def test_a_record_that_is_not_an_example_fails_in_its_place(tmp_path, parse):
    paths = _files(tmp_path, [20], bad=9)
    if parse == "batch":
        fast = _outcomes(tf.data.TFRecordDataset(paths).batch(4).map(_parse))
        slow = _outcomes(tf.data.TFRecordDataset(paths).map(_same).batch(4).map(_parse))
    else:
        fast = _outcomes(tf.data.TFRecordDataset(paths).map(_parse_one).batch(4))
        slow = _outcomes(tf.data.TFRecordDataset(paths).map(_parse_one).map(_same).batch(4))
    assert fast == slow
    assert "InvalidArgumentError" in fast


def test_a_corrupted_record_stops_the_file_where_it_lies(tmp_path):
    (path,) = _files(tmp_path, [12])
    data = bytearray(pathlib.Path(path).read_bytes())
    data[len(data) * 7 // 12 + 20] ^= 0xFF  # inside record 7's data
    pathlib.Path(path).write_bytes(bytes(data))
    fast = _outcomes(tf.data.TFRecordDataset([path]).batch(3).map(_parse), 5, False)
    slow = _outcomes(tf.data.TFRecordDataset([path]).map(_same).batch(3).map(_parse), 5, False)
    assert fast == slow
    assert fast[2:] == ["DataLossError"] * 3  # the file stays at the bad record
    assert fast[1][1] == [i * 1000003 for i in (3, 4, 5)]


def test_maps_that_do_more_than_parse_run_their_body(tmp_path):
    paths = _files(tmp_path, [10])
    with_default = {"z": tf.FixedLenFeature([], tf.int64, default_value=-1), **FEATURES}
    got = _outcomes(
        tf.data.TFRecordDataset(paths).batch(5).map(lambda r: tf.parse_example(r, with_default))
    )
    assert [b[1] for b in got] == [[i * 1000003 for i in range(5 * k, 5 * k + 5)] for k in (0, 1)]
    assert [b[2] for b in got] == [[-1] * 5] * 2  # the default of the missing key
    doubled = _outcomes(tf.data.TFRecordDataset(paths).batch(5).map(lambda r: _parse(r)["y"] * 2))
    assert doubled == [[[2 * i * 1000003 for i in range(5 * k, 5 * k + 5)]] for k in (0, 1)]


def test_packed_strings_and_concat():
    from flowgraph.kernels.cpu.dataset_packed import Packed, concat

    a = Packed.of_bytes([b"ab", b"", b"cde"])
    view = Packed(np.frombuffer(b"..xy..z", np.uint8), np.array([2, 6]), np.array([4, 7]))
    assert a.strings().tolist() == [b"ab", b"", b"cde"]
    assert concat([a, view]).strings().tolist() == [b"ab", b"", b"cde", b"xy", b"z"]
    assert view.compact().data.tobytes() == b"xyz"


def _shuffle_by_list(buffer: list, run: list, size: int, draws) -> tuple:
    """get_next's moves, draw by draw, on a list: (drawn, kept)."""
    buffer, run, drawn = list(buffer), list(run), []
    for j in draws:
        while len(buffer) < size and run:
            buffer.append(run.pop(0))
        drawn.append(buffer[j])
        buffer[j] = buffer[-1]
        buffer.pop()
    return drawn, buffer + run


def _amid_bytes(p, rng):
    """`p`'s strings, at times lying amid other bytes (a few before them, or many after)."""
    pad = [0, 3, 300][rng.integers(0, 3)]
    junk = rng.integers(0, 256, pad, dtype=np.uint8)
    data = np.concatenate([junk[:3], p.data, junk[3:]])
    return type(p)(data, p.starts + len(junk[:3]), p.ends + len(junk[:3]))


def test_arena_shuffle_equals_the_moves_on_a_list(monkeypatch):
    """The arena's shuffle (copy the runs in, replay, gather bounds) draws and keeps the
    records that get_next's moves on a list do, also across compactions into new buffers,
    with the input split into several runs (some lying amid other bytes, some holding far
    more bytes than their records), and records drawn earlier stay valid."""
    from flowgraph.kernels.cpu import dataset_packed
    from flowgraph.kernels.cpu.dataset_packed import Arena, Packed

    monkeypatch.setattr(dataset_packed, "_MIN_ARENA", 64)
    monkeypatch.setattr(dataset_packed, "_SPAN_PER_STRING", 16)  # padded runs are compacted
    rng = np.random.default_rng(3)
    arena, kept, buffer, earlier = Arena(), None, [], []
    for step in range(60):
        size = 5
        run = [bytes(rng.integers(0, 256, rng.integers(0, 9), dtype=np.uint8)) for _ in range(4)]
        run = run[: rng.integers(0, 5)]
        cuts = sorted(rng.integers(0, len(run) + 1, rng.integers(0, 3)).tolist())
        pieces = [run[a:b] for a, b in zip([0, *cuts], [*cuts, len(run)]) if b > a]
        packed = [_amid_bytes(Packed.of_bytes(p), rng) for p in pieces]
        available = len(buffer) + len(run)
        bounds = [min(size, available - t) for t in range(min(3, available))]
        draws = np.array([rng.integers(0, b) for b in bounds], np.int64)
        want_drawn, buffer = _shuffle_by_list(buffer, run, size, draws)
        picked, kept = arena.shuffle(kept, packed, size, draws)
        assert picked.strings().tolist() == want_drawn, step
        assert kept.strings().tolist() == buffer, step
        earlier.append((picked, want_drawn))
    assert all(p.strings().tolist() == want for p, want in earlier)


def test_records_cut_ahead_serve_elements_and_runs_in_order(tmp_path, small_reads):
    """A TFRecord source cuts the records of its read buffer ahead: a skip (runs) followed by
    elements one by one, or by a batch, reads each record once, in order, across buffers."""
    paths = []
    want = []
    for f in range(2):
        paths.append(str(tmp_path / f"r{f}.tfrecord"))
        with tf.python_io.TFRecordWriter(paths[-1]) as w:
            for i in range(40):
                want.append(b"%d-%d:" % (f, i) + b"x" * (i * 7 % 50))
                w.write(want[-1])
    source = tf.data.TFRecordDataset(paths)
    assert [bytes(v) for v in drain(source.skip(7))] == want[7:]
    batches = drain(source.skip(7).batch(5))
    assert [bytes(v) for b in batches for v in b] == want[7:]
    assert [len(b) for b in batches] == [5] * 14 + [3]


def test_shuffle_bounds_closed_form_equals_refilling_draw_by_draw():
    from flowgraph.kernels.cpu.dataset_shuffle import _bounds

    def by_draws(length, size, n, fed, error):
        bounds = []
        for _ in range(n):
            add = min(size - length, fed)
            length, fed = length + add, fed - add
            if (length < size and not fed and error) or not length:
                break
            bounds.append(length)
            length -= 1
        return bounds

    for size in range(1, 7):
        for length in range(size + 1):
            for n in range(10):
                for fed in range(15):
                    for error in (False, True):
                        want = by_draws(length, size, n, fed, error)
                        got = _bounds(length, size, n, fed, ValueError() if error else None)
                        assert got.tolist() == want, (size, length, n, fed, error)


def test_parse_single_example_of_sliced_records_parses_their_columns():
    serialized = np.array([_example(i) for i in range(10)], dtype=object)
    source = Dataset.from_tensor_slices(serialized)
    fast = _outcomes(source.map(_parse_one).batch(4))
    slow = _outcomes(source.map(_parse_one).map(_same).batch(4))
    assert fast == slow
    assert [y for batch in fast for y in batch[1]] == [i * 1000003 for i in range(10)]


def test_one_call_parse_of_several_keys_equals_the_protobuf_parse():
    """dataset_wire.Layout puts float keys side by side in one array and int64 keys in
    another; each key's values equal parse_example's (protobuf's) own, and a record that is
    not the plain case gives None (the body runs)."""
    from flowgraph.kernels.cpu import example_wire
    from flowgraph.kernels.cpu.dataset_packed import Packed
    from flowgraph.kernels.cpu.dataset_wire import Layout

    rng = np.random.default_rng(5)
    features = {
        "a": ([2, 3], np.float32),
        "n": ([2], np.int64),
        "b": ([1], np.float32),
        "k": ([], np.int64),
    }
    records = []
    for _ in range(7):
        ex = tf.train.Example()
        for key, (shape, dtype) in features.items():
            size = int(np.prod(shape))
            if dtype == np.float32:
                ex.features.feature[key].float_list.value.extend(rng.normal(size=size).tolist())
            else:
                values = rng.integers(-(2**62), 2**62, size).tolist()
                ex.features.feature[key].int64_list.value.extend(values)
        records.append(ex.SerializeToString())
    keys = tuple(features)
    sizes = tuple(int(np.prod(s)) for s, _ in features.values())
    layout = Layout(example_wire.spec(keys, tuple(d for _, d in features.values()), sizes))
    packed = Packed.of_bytes(records)
    got = layout.parse(packed.data, packed.starts, packed.ends)
    want = tf.Session().run(
        tf.parse_example(
            records, {k: tf.FixedLenFeature(s, tf.as_dtype(d)) for k, (s, d) in features.items()}
        )
    )
    for key, values, (shape, dtype) in zip(keys, got, features.values()):
        assert values.dtype == dtype and values.flags.c_contiguous
        np.testing.assert_array_equal(values.reshape(7, *shape), want[key])
    short = Packed.of_bytes(records[:3] + [records[3][:-2]])
    assert layout.parse(short.data, short.starts, short.ends) is None
