"""A prefetch's refill in one pass (Iterator.get_ahead, issue 11 I2d): a parse-only map over a
batch reads and parses the records of all the batches the prefetch has room for at once. Each
pipeline is compared with the element path (an identity map before the batch, no prefetch),
which gives every batch, error and end in its place."""

import numpy as np
import pytest
from test_dataset_fast_paths import _files, _outcomes, _parse, _same, small_reads  # noqa: F401

import flowgraph as tf
from flowgraph.kernels.cpu import dataset_parse, dataset_transforms
from flowgraph.kernels.cpu.dataset_base import run_to_end
from flowgraph.kernels.cpu.dataset_runs import Packed, Run, cut


def _pipeline(paths, fast, drop=False, size=37, batch=16):
    ds = tf.data.TFRecordDataset(paths).shuffle(size, seed=3).repeat(2)
    ds = ds if fast else ds.map(_same)
    return ds.batch(batch, drop_remainder=drop).map(_parse)


@pytest.mark.parametrize("prefetch", [2, 3, 6])
@pytest.mark.parametrize("reads", ["default", "small"])
def test_prefetched_parsed_batches_equal_the_element_path(tmp_path, request, prefetch, reads):
    if reads == "small":
        request.getfixturevalue("small_reads")
    paths = _files(tmp_path, [70, 45])
    for drop in (True, False):
        fast = _outcomes(_pipeline(paths, True, drop).prefetch(prefetch))
        assert fast == _outcomes(_pipeline(paths, False, drop))
        assert len(fast) == (230 // 16 if drop else 230 // 16 + 1)


def test_prefetched_errors_keep_their_place_and_the_batches_after_them(tmp_path):
    paths = _files(tmp_path, [20, 13], bad=9)  # batch 2 of 4 records fails to parse
    fast = _outcomes(tf.data.TFRecordDataset(paths).batch(4).map(_parse).prefetch(3))
    slow = _outcomes(tf.data.TFRecordDataset(paths).map(_same).batch(4).map(_parse))
    assert fast == slow
    assert fast[2] == "InvalidArgumentError" and len(fast) == 9


class _Maps:
    """Captures the map iterators made while it is installed (monkeypatch)."""

    def __init__(self, monkeypatch):
        self.made = []
        init = dataset_transforms._MapIterator.__init__

        def capture(it, *args, **kwargs):
            init(it, *args, **kwargs)
            self.made.append(it)

        monkeypatch.setattr(dataset_transforms._MapIterator, "__init__", capture)


def _ahead(ds, k, monkeypatch) -> tuple[list, int]:
    """Every outcome of get_ahead(k) of the map iterator `ds` makes, flattened as _outcomes
    flattens elements, and how many parse calls made them."""
    maps = _Maps(monkeypatch)
    calls = []
    parse = dataset_parse.ParseCall.__call__
    monkeypatch.setattr(
        dataset_parse.ParseCall, "__call__", lambda p, r: calls.append(len(r)) or parse(p, r)
    )
    it = tf.data.make_initializable_iterator(ds)
    with tf.Session() as sess:
        sess.run(it.initializer)
    (mapped,) = maps.made
    out = []
    for _ in range(100):
        outcomes = run_to_end(mapped.get_ahead(k))
        if not outcomes:
            return out, calls
        assert len(outcomes) <= k + 1
        for element, error in outcomes:
            if error is not None:
                out.append(type(error).__name__)
            else:
                out.append([np.asarray(v).tolist() for v in element])
    raise AssertionError("get_ahead did not end")


@pytest.mark.parametrize("k", [2, 3])
def test_get_ahead_parses_k_batches_in_one_call(tmp_path, monkeypatch, k):
    paths = _files(tmp_path, [70, 45])
    for drop in (True, False):
        got, calls = _ahead(_pipeline(paths, True, drop), k, monkeypatch)
        monkeypatch.undo()
        assert got == _outcomes(_pipeline(paths, False, drop))
        batches = len(got)
        assert len(calls) == -(-batches // k)  # one parse per get_ahead
        assert sum(calls) == (batches * 16 if drop else 230)


def test_get_ahead_falls_back_batch_by_batch_where_the_parse_cannot_read(tmp_path, monkeypatch):
    paths = _files(tmp_path, [20, 13], bad=9)
    got, calls = _ahead(tf.data.TFRecordDataset(paths).batch(4).map(_parse), 4, monkeypatch)
    monkeypatch.undo()
    assert got == _outcomes(tf.data.TFRecordDataset(paths).map(_same).batch(4).map(_parse))
    assert got[2] == "InvalidArgumentError"
    assert calls[:5] == [16, 4, 4, 4, 4]  # the first 4 batches at once, then one by one


def test_a_read_error_after_full_batches_follows_them(tmp_path, monkeypatch):
    """A corrupted record: the batches before it come first, then its DataLossError (the
    elements read of the batch it cuts are lost, as the element path loses them)."""
    import pathlib

    (path,) = _files(tmp_path, [12])
    data = bytearray(pathlib.Path(path).read_bytes())
    data[len(data) * 7 // 12 + 20] ^= 0xFF  # inside record 7's data
    pathlib.Path(path).write_bytes(bytes(data))
    maps = _Maps(monkeypatch)
    it = tf.data.make_initializable_iterator(tf.data.TFRecordDataset([path]).batch(3).map(_parse))
    with tf.Session() as sess:
        sess.run(it.initializer)
    outcomes = run_to_end(maps.made[0].get_ahead(4))
    assert [e is None for e, _ in outcomes] == [False, False, True]
    assert [int(v) for v in outcomes[1][0][1]] == [i * 1000003 for i in (3, 4, 5)]
    assert type(outcomes[2][1]).__name__ == "DataLossError"
    with pytest.raises(tf.errors.DataLossError):  # the file stays at the bad record
        run_to_end(maps.made[0].get_ahead(4))


def test_cut_runs_of_every_form_into_batches():
    packed = Run.of_packed(Packed.of_bytes([b"a", b"bc", b"", b"def"]))
    columns = Run.of_columns([np.arange(5), np.arange(5) * 10])
    elements = Run.of_elements([(np.int64(i), np.int64(-i)) for i in range(3)])
    groups = cut([packed, Run.of_packed(Packed.of_bytes([b"g"]))], [3, 2])
    assert [[r.packed.strings().tolist() for r in g] for g in groups] == [
        [[b"a", b"bc", b""]],
        [[b"def"], [b"g"]],
    ]
    groups = cut([columns, elements], [2, 4, 1])
    assert [sum(r.n for r in g) for g in groups] == [2, 4, 1]
    rows = [[int(e[1]) for r in g for e in r.elements] for g in groups]
    assert rows == [[0, 10], [20, 30, 40, 0], [-1]]
    assert cut([columns], [5])[0][0] is columns  # a whole run is not sliced


@pytest.mark.parametrize("prefetch", [0, 2])
def test_a_shuffle_in_its_steady_state_takes_spans_as_its_runs_would_give(
    tmp_path, monkeypatch, prefetch
):
    """_ShuffleIterator.take_packed (a batch's elements in one step from the source's cut
    ahead) gives the batches, in the order, that get_many gives with it switched off."""
    from flowgraph.kernels.cpu import dataset_shuffle, dataset_sources

    paths = _files(tmp_path, [300, 170])
    taken = []
    take_span = dataset_sources._FileIterator.take_span

    def counted(it, n):
        span = take_span(it, n)
        taken.append(span is not None)
        return span

    def make():
        ds = tf.data.TFRecordDataset(paths).shuffle(40, seed=5).repeat(2).batch(8).map(_parse)
        return ds.prefetch(prefetch) if prefetch else ds

    monkeypatch.setattr(dataset_sources._FileIterator, "take_span", counted)
    fast = _outcomes(make())
    assert sum(taken) > len(fast) // 2  # most batches took their records at once
    monkeypatch.setattr(dataset_shuffle._ShuffleIterator, "take_packed", lambda it, n: None)
    assert fast == _outcomes(make())
    assert len(fast) == 2 * 470 // 8 + 1


def test_arena_shuffle_of_a_span_equals_the_shuffle_of_its_run():
    from flowgraph.kernels.cpu.dataset_packed import Arena

    rng = np.random.default_rng(7)
    records = [bytes(rng.integers(0, 256, rng.integers(0, 30), dtype=np.uint8)) for _ in range(60)]
    frames = b"".join(b"<%02d>" % len(r) + r for r in records)  # 4 bytes before each record
    starts = np.cumsum([0] + [len(r) + 4 for r in records[:-1]]) + 4
    ends = starts + np.array([len(r) for r in records])
    buffer = np.frombuffer(frames, np.uint8)
    spans, runs, size = Arena(), Arena(), 16
    kept_a = kept_b = None
    drawn = []
    for lo, hi in ((0, 25), (25, 41), (41, 60)):
        span = Packed(buffer, starts[lo:hi], ends[lo:hi])
        base = starts[lo]
        run = Packed(buffer[base : ends[hi - 1]], starts[lo:hi] - base, ends[lo:hi] - base)
        held = 0 if kept_a is None else len(kept_a)
        draws = rng.integers(0, size, held + hi - lo - size + 1)  # while the buffer is full
        picked_a, kept_a = spans.shuffle_span(kept_a, span, size, draws)
        picked_b, kept_b = runs.shuffle(kept_b, [run], size, draws)
        assert picked_a.strings().tolist() == picked_b.strings().tolist()
        assert kept_a.strings().tolist() == kept_b.strings().tolist()
        drawn += picked_a.strings().tolist()
    assert sorted(drawn + kept_a.strings().tolist()) == sorted(records)
