"""TF1 API that flowgraph lacks raises NotImplementedError naming it; other missing names stay
AttributeErrors, so hasattr/getattr-with-default behave as with TensorFlow."""

import pytest

import flowgraph as tf
from flowgraph import api_surface


def _missing(table):
    """(qualified name, resolver) for TF1 names flowgraph lacks, through real namespaces."""
    for path, names in sorted(table.items()):
        module = api_surface._existing(tf, path)
        if module is None:
            continue
        for name in sorted(names):
            if name not in vars(module) and not hasattr(type(module), name):
                yield f"tf.{path}.{name}" if path else f"tf.{name}", module, name


def test_the_listing_is_tf1s_api():
    table = api_surface.tf1_names()
    assert {"", "nn", "train", "image", "layers", "nn.rnn_cell"} <= set(table)
    assert {"placeholder", "Session", "while_loop"} <= table[""]
    assert "dynamic_rnn" in table["nn"] and "LSTMCell" in table["nn.rnn_cell"]


def test_every_missing_tf1_name_raises_not_implemented_naming_it():
    missing = list(_missing(api_surface.tf1_names()))
    assert missing, "the listing should contain names flowgraph lacks"
    for qualified, module, name in missing:
        with pytest.raises(NotImplementedError, match=qualified.replace(".", r"\.")):
            getattr(module, name)


def test_missing_submodule_and_compat_path():
    with pytest.raises(NotImplementedError, match=r"tf\.quantization"):
        tf.quantization  # noqa: B018
    with pytest.raises(NotImplementedError, match=r"tf\.nn\.ctc_beam_search_decoder"):
        tf.compat.v1.nn.ctc_beam_search_decoder  # noqa: B018


def test_names_tensorflow_lacks_are_attribute_errors():
    assert not hasattr(tf, "no_such_api")
    assert getattr(tf.nn, "no_such_api", 7) == 7
    with pytest.raises(AttributeError, match="no_such_api"):
        tf.train.no_such_api  # noqa: B018
    assert not hasattr(tf, "__wrapped__")


def test_every_contrib_name_is_tf1_api():
    with pytest.raises(NotImplementedError, match=r"tf\.contrib\.framework"):
        tf.contrib.framework  # noqa: B018


def test_existing_names_and_lazy_submodules_resolve():
    assert tf.nn.relu is not None and tf.train.Saver is not None
    import flowgraph.train

    assert flowgraph.train.queue_runner.QueueRunner is tf.train.QueueRunner


def test_second_homes_are_the_same_objects():
    assert tf.math.top_k is tf.nn.top_k and tf.math.softmax is tf.nn.softmax
    assert tf.math.unsorted_segment_sum is tf.unsorted_segment_sum
    assert tf.io.PaddingFIFOQueue is tf.PaddingFIFOQueue
    assert tf.io.serialize_sparse is tf.serialize_sparse
    assert tf.initializers.tables_initializer is tf.tables_initializer
    assert tf.linalg.global_norm is tf.global_norm
    assert tf.saved_model.SERVING == "serve" and tf.saved_model.ASSETS_KEY == "saved_model_assets"
    assert tf.saved_model.CLASSIFY_INPUTS == "inputs"


def test_modules_contrib_merely_imports_are_left_alone():
    import flowgraph.ops.array as array_ops
    from flowgraph.contrib.seq2seq import decoder

    assert "__getattr__" not in vars(array_ops)
    with pytest.raises(AttributeError):
        array_ops.no_such_name  # noqa: B018
    assert vars(decoder).get("__getattr__") is None
