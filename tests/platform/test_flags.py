"""tf.flags / tf.app.flags: absl-style definitions and command-line parsing."""

from __future__ import annotations

import sys

import pytest

import flowgraph as tf
from flowgraph.platform import flags


@pytest.fixture
def fv():
    values = flags.FlagValues()
    flags.DEFINE_string("name", "anon", "a string", flag_values=values)
    flags.DEFINE_integer("steps", 10, "an int", lower_bound=0, flag_values=values)
    flags.DEFINE_float("lr", 0.5, "a float", flag_values=values)
    flags.DEFINE_boolean("fake", False, "a bool", flag_values=values)
    flags.DEFINE_bool("shuffle", True, "another bool", flag_values=values)
    flags.DEFINE_list("layers", "128,64", "a list", flag_values=values)
    flags.DEFINE_enum("mode", "train", ["train", "eval"], "an enum", flag_values=values)
    flags.DEFINE_multi_integer("seed", [], "repeatable", flag_values=values)
    return values


def test_defaults_have_their_types(fv):
    fv(["prog"])
    assert (fv.name, fv.steps, fv.lr, fv.fake, fv.shuffle) == ("anon", 10, 0.5, False, True)
    assert fv.layers == ["128", "64"] and fv.mode == "train" and fv.seed == []
    assert fv["steps"].default == 10 and fv["steps"].using_default_value


def test_every_syntax(fv):
    rest = fv(
        [
            "prog",
            "--name=bob",
            "pos1",
            "--steps",
            "7",
            "-lr=0.25",
            "--fake",
            "--noshuffle",
            "--layers=1, 2,3",
            "--mode",
            "eval",
            "--seed=1",
            "--seed",
            "2",
            "pos2",
        ]
    )
    assert rest == ["prog", "pos1", "pos2"]
    assert (fv.name, fv.steps, fv.lr, fv.fake, fv.shuffle) == ("bob", 7, 0.25, True, False)
    assert fv.layers == ["1", "2", "3"] and fv.mode == "eval" and fv.seed == [1, 2]
    assert fv["steps"].present == 1 and not fv["steps"].using_default_value


@pytest.mark.parametrize("text, value", [("true", True), ("F", False), ("1", True), ("0", False)])
def test_boolean_values(fv, text, value):
    fv(["prog", f"--fake={text}"])
    assert fv.fake is value


def test_double_dash_ends_flags_and_last_occurrence_wins(fv):
    assert fv(["prog", "--steps=1", "--steps=2", "--", "--name=x"]) == ["prog", "--name=x"]
    assert fv.steps == 2 and fv.name == "anon"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--steps=abc"], "flag --steps=abc"),
        (["--steps=-1"], "not in the range"),
        (["--lr=fast"], "flag --lr=fast"),
        (["--fake=maybe"], "Non-boolean"),
        (["--mode=test"], "one of <train|eval>"),
        (["--steps"], "missing value"),
    ],
)
def test_illegal_values(fv, argv, message):
    with pytest.raises(flags.IllegalFlagValueError, match=message):
        fv(["prog", *argv])


def test_unknown_flags_are_an_error_listing_them(fv):
    with pytest.raises(flags.UnrecognizedFlagError, match="'bogus', 'other'"):
        fv(["prog", "--bogus=1", "--steps=3", "--other"])
    rest = fv(["prog", "--bogus=1", "x", "--steps=3"], known_only=True)
    assert rest == ["prog", "--bogus=1", "x"] and fv.steps == 3


def test_required_flags_and_validators(fv):
    flags.DEFINE_string("data_dir", None, "where the data is", flag_values=fv)
    flags.mark_flag_as_required("data_dir", flag_values=fv)
    with pytest.raises(
        flags.IllegalFlagValueError, match="--data_dir must have a value other than None"
    ):
        fv(["prog"])
    fv(["prog", "--data_dir=/d"])
    assert fv.data_dir == "/d"
    flags.register_validator("lr", lambda v: v < 1, "lr must be below 1", flag_values=fv)
    with pytest.raises(flags.IllegalFlagValueError, match="lr must be below 1"):
        fv(["prog", "--data_dir=/d", "--lr=2"])
    with pytest.raises(KeyError):
        flags.mark_flag_as_required("undefined", flag_values=fv)


def test_lazy_parse_from_sys_argv_assignment_and_dict(fv, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["script.py", "--steps=42"])
    assert not fv.is_parsed()
    assert fv.steps == 42 and fv.is_parsed()
    fv.steps = 5
    assert fv.steps == 5 and fv.flag_values_dict()["steps"] == 5
    assert "steps" in fv and "nope" not in fv
    with pytest.raises(AttributeError):
        _ = fv.nope
    fv.unparse_flags()
    assert not fv.is_parsed() and fv["steps"].value == 10
    monkeypatch.setattr(sys, "argv", ["script.py", "--unknown"])
    with pytest.raises(flags.UnrecognizedFlagError, match="unknown"):
        _ = fv.steps


def test_duplicates_old_argument_names_and_bad_arguments(fv):
    with pytest.raises(flags.DuplicateFlagError, match="'steps' is defined twice"):
        flags.DEFINE_integer("steps", 1, "again", flag_values=fv)
    flags.DEFINE_string(
        flag_name="old", default_value="v", docstring="TF<1.5 names", flag_values=fv
    )
    fv(["prog"])
    assert fv.old == "v"
    with pytest.raises(TypeError, match="unsupported argument"):
        flags.DEFINE_string("x", "v", "h", flag_values=fv, bogus=1)
    with pytest.raises(flags.IllegalFlagValueError):
        flags.DEFINE_enum("e", "c", ["a", "b"], "bad default", flag_values=fv)
    with pytest.raises(TypeError):
        fv("--steps=1")  # argv must be a list


def test_help_lists_every_flag(fv):
    text = fv.get_help()
    assert (
        "--steps: an int" in text and "--[no]fake: a bool" in text and "(default: 'train')" in text
    )


def test_tf_namespaces_share_one_flags_object():
    assert tf.flags.FLAGS is tf.app.flags.FLAGS is flags.FLAGS
    assert tf.flags.DEFINE_integer is flags.DEFINE_integer
