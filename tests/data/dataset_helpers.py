"""Helpers shared by the tf.data tests: read every element a dataset yields, bounded, so a
dataset that never ends fails the test instead of hanging it."""

import flowgraph as tf


def drain_element(sess, element, limit=10_000) -> list:
    """Runs `element` (an iterator's get_next) until OutOfRangeError; the values in order."""
    out = []
    for _ in range(limit):
        try:
            out.append(sess.run(element))
        except tf.errors.OutOfRangeError:
            return out
    raise AssertionError("the dataset did not end")


def drain(dataset, limit=10_000) -> list:
    """Every element of `dataset`, through a one-shot iterator in a new Session."""
    nxt = dataset.make_one_shot_iterator().get_next()
    with tf.Session() as sess:
        return drain_element(sess, nxt, limit)
