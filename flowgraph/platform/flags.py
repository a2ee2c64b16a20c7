"""Command-line flags: tf.flags / tf.app.flags (TF 1.15's tf.flags is absl.flags behind a lazy
parsing wrapper; this module behaves the same way without depending on absl).

    tf.app.flags.DEFINE_integer("batch_size", 100, "Examples per step.")
    FLAGS = tf.app.flags.FLAGS
    print(FLAGS.batch_size)        # the first access parses sys.argv, as in TF 1.15

Syntax (absl's): `--name=value`, `--name value`, `-name=value`; booleans take `--name`,
`--noname` or `--name=true|false|t|f|1|0` (never a separate value); `--` ends the flags;
positional arguments may be interleaved with flags. Parsing `FLAGS(argv)` returns
`[argv[0], *positional]`; an unknown flag is an UnrecognizedFlagError naming every unknown flag,
unless `known_only=True` (what tf.app.run uses), which passes them through with the positionals.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

__all__ = [
    "FLAGS",
    "DEFINE_bool",
    "DEFINE_boolean",
    "DEFINE_enum",
    "DEFINE_float",
    "DEFINE_integer",
    "DEFINE_list",
    "DEFINE_multi_float",
    "DEFINE_multi_integer",
    "DEFINE_multi_string",
    "DEFINE_string",
    "DuplicateFlagError",
    "Error",
    "Flag",
    "FlagValues",
    "IllegalFlagValueError",
    "UnrecognizedFlagError",
    "ValidationError",
    "mark_flag_as_required",
    "mark_flags_as_required",
    "register_validator",
]


class Error(Exception):
    """Base class of flag errors (absl.flags.Error)."""


class UnrecognizedFlagError(Error):
    """The command line names flags that were never defined."""


class IllegalFlagValueError(Error):
    """A flag's value does not parse, is out of bounds, or fails a validator."""


class DuplicateFlagError(Error):
    """A flag name was defined twice by different modules."""


class ValidationError(Error):
    """A validator rejected the flags' values."""


# -- value parsers: text -> value; each raises ValueError with a reason --------------------------
_TRUE = ("true", "t", "1")
_FALSE = ("false", "f", "0")


def _parse_bool(text) -> bool:
    if isinstance(text, bool) or text in (0, 1):
        return bool(text)
    if isinstance(text, str) and text.lower() in _TRUE + _FALSE:
        return text.lower() in _TRUE
    raise ValueError(f"Non-boolean argument to boolean flag: {text!r}")


def _parse_int(text) -> int:
    if isinstance(text, int) and not isinstance(text, bool):
        return text
    try:
        return int(str(text), 0)
    except ValueError:
        return int(str(text))  # "010" is 10, as absl reads it


def _parse_list(text) -> list:
    if isinstance(text, (list, tuple)):
        return [str(v) for v in text]
    return [part.strip() for part in str(text).split(",")] if str(text).strip() else []


class Flag:
    """One defined flag: its parser, default, help and current value.

    `present` counts the command-line occurrences; `using_default_value` is False once the
    command line or an assignment set the value."""

    def __init__(
        self,
        name: str,
        default,
        help_: str,
        parse: Callable,
        kind: str,
        *,
        boolean: bool = False,
        multi: bool = False,
        short_name: str | None = None,
        check: Callable | None = None,
    ):
        self.name, self.help, self.kind, self.short_name = name, help_, kind, short_name
        self.boolean, self.multi = boolean, multi
        self._parse, self._check = parse, check
        self.validators: list = []
        self.present = 0
        self.default = None if default is None else self.parse_value(default)
        self.value = self.default
        self.using_default_value = True
        self.allow_override = False

    def parse_value(self, text):
        """`text` (or a Python default) as this flag's value; IllegalFlagValueError otherwise."""
        try:
            if self.multi:
                items = text if isinstance(text, (list, tuple)) else [text]
                value = [self._parse(v) for v in items]
            else:
                value = self._parse(text)
            if self._check is not None:
                for v in value if self.multi else [value]:
                    self._check(v)
        except (ValueError, TypeError) as e:
            raise IllegalFlagValueError(f"flag --{self.name}={text}: {e}") from None
        return value

    def parse(self, text) -> None:
        """Applies one command-line occurrence (a multi flag accumulates after the first)."""
        value = self.parse_value(text)
        if self.multi and self.present:
            value = self.value + value
        self.value = value
        self.present += 1
        self.using_default_value = False

    def describe(self) -> str:
        """The help entry: `--name: help` and the default."""
        default = ",".join(self.default) if self.kind == "list" and self.default else self.default
        prefix = "[no]" if self.boolean else ""
        return f"  --{prefix}{self.name}: {self.help}\n    (default: {default!r})"


class FlagValues:
    """A set of flags and their values (absl's FlagValues); FLAGS is the process-wide one.

    Reading a flag before parsing parses sys.argv first (TF 1.15's behaviour). Assigning
    `FLAGS.name = value` sets the value without parsing, as absl does."""

    def __init__(self):
        # Stored in __dict__ directly: __setattr__ is the flag-assignment path. "__flags" is
        # where absl keeps them, and old scripts read `FLAGS.__flags`.
        self.__dict__["__flags"] = {}
        self.__dict__["_defined_by"] = {}  # name -> (module name, id of its globals)
        self.__dict__["_parsed"] = False
        self.__dict__["_validators"] = []  # (flag names, checker(dict) -> bool, message)

    @property
    def _flags(self) -> dict:
        return self.__dict__["__flags"]

    # -- defining -------------------------------------------------------------------------------
    def _define(self, flag: Flag, allow_override: bool = False, depth: int = 3) -> Flag:
        caller = sys._getframe(depth).f_globals
        where = (caller.get("__name__", "?"), id(caller))
        old = self._flags.get(flag.name)
        if old is not None and not (allow_override or old.allow_override):
            first = self._defined_by[flag.name]
            if first[0] == where[0] and first[1] != where[1]:
                return old  # the same module imported (or run) again: keep the first definition
            raise DuplicateFlagError(
                f"The flag '{flag.name}' is defined twice. First from {first[0]}, Second from "
                f"{where[0]}."
            )
        flag.allow_override = allow_override
        self._flags[flag.name] = flag
        self._defined_by[flag.name] = where
        if flag.short_name:
            self._flags[flag.short_name] = flag
        return flag

    # -- parsing --------------------------------------------------------------------------------
    def __call__(self, argv, known_only: bool = False) -> list:
        """Parses the flags in argv[1:]; returns [argv[0], *arguments that are not flags]."""
        if isinstance(argv, str):
            raise TypeError("argv should be a tuple/list of strings, not a string")
        argv = list(argv)
        if not argv:
            raise ValueError("argv cannot be empty: argv[0] is the program name")
        rest, unknown = [argv[0]], []
        args = iter(argv[1:])
        for arg in args:
            if arg == "--":
                rest.extend(args)
                break
            if not arg.startswith("-") or arg == "-":
                rest.append(arg)
                continue
            name, eq, value = arg.lstrip("-").partition("=")
            flag = self._flags.get(name)
            if flag is None and name.startswith("no") and not eq:
                negated = self._flags.get(name[2:])
                if negated is not None and negated.boolean:
                    negated.parse(False)
                    continue
            if flag is None:
                unknown.append(arg)
                continue
            if not eq and not flag.boolean:
                value = next(args, None)
                if value is None:
                    raise IllegalFlagValueError(f"flag --{name}: missing value")
            flag.parse(value if eq or not flag.boolean else True)
        if unknown and not known_only:
            names = ", ".join(repr(u.lstrip("-").partition("=")[0]) for u in unknown)
            raise UnrecognizedFlagError(f"Unknown command line flag(s): {names}")
        self.__dict__["_parsed"] = True
        self.validate_all_flags()
        return rest[:1] + unknown + rest[1:]

    def validate_all_flags(self, only: str | None = None) -> None:
        """Runs every validator (or those of flag `only`); IllegalFlagValueError names the
        flags and the validator's message."""
        for names, checker, message in self._validators:
            if only is not None and only not in names:
                continue
            values = {n: self._flags[n].value for n in names}
            if not checker(values if len(names) > 1 else values[names[0]]):
                shown = ", ".join(f"--{n}={v}" for n, v in values.items())
                raise IllegalFlagValueError(f"flag {shown}: {message}")

    def is_parsed(self) -> bool:
        return self._parsed

    def mark_as_parsed(self) -> None:
        self.__dict__["_parsed"] = True

    def unparse_flags(self) -> None:
        """Back to the defaults, not parsed."""
        for flag in self._flags.values():
            flag.value, flag.present, flag.using_default_value = flag.default, 0, True
        self.__dict__["_parsed"] = False

    # -- values ---------------------------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        flag = self.__dict__["__flags"].get(name)
        if flag is None:
            raise AttributeError(name)
        if not self._parsed:
            self(sys.argv)
        return flag.value

    def __setattr__(self, name: str, value) -> None:
        flag = self._flags.get(name)
        if flag is None:
            raise AttributeError(f"no flag named {name!r}: define it with DEFINE_* first")
        flag.value, flag.using_default_value = value, False
        self.validate_all_flags(only=flag.name)

    def __getitem__(self, name: str) -> Flag:
        if name not in self._flags:
            raise KeyError(name)
        return self._flags[name]

    def __contains__(self, name) -> bool:
        return name in self._flags

    def __iter__(self):
        return iter(self._flags)

    def __len__(self) -> int:
        return len(self._flags)

    def __dir__(self):
        return sorted(set(self._flags) | set(type(self).__dict__))

    def set_default(self, name: str, value) -> None:
        """Changes the default (and the value, if no command line or assignment set it)."""
        flag = self[name]
        flag.default = flag.parse_value(value)
        if flag.using_default_value:
            flag.value = flag.default

    def get_flag_value(self, name: str, default):
        return self._flags[name].value if name in self._flags else default

    def flag_values_dict(self) -> dict:
        return {name: flag.value for name, flag in self._flags.items()}

    def get_help(self) -> str:
        """Every flag's help entry, sorted by name."""
        seen = {id(f): f for f in self._flags.values()}
        return "\n".join(f.describe() for f in sorted(seen.values(), key=lambda f: f.name))

    def __str__(self) -> str:
        return self.get_help()


FLAGS = FlagValues()

# TF 1.x's tf.flags accepted these argument names before absl; 1.15 still maps them.
_RENAMED = {"flag_name": "name", "default_value": "default", "docstring": "help"}
_SUPPORTED_EXTRA = {"short_name", "allow_override", "module_name"}


def _new_flag(kind, parse, args, kwargs, *, boolean=False, multi=False, check=None, extra=()):
    """Builds and registers a flag from DEFINE_* arguments (positional or keyword); `check`,
    if given, makes the value check from the bound arguments."""
    for old, new in _RENAMED.items():
        if old in kwargs:
            kwargs[new] = kwargs.pop(old)
    names = ("name", "default", *extra, "help")
    if len(args) > len(names):
        raise TypeError(f"DEFINE_{kind} takes at most {len(names)} positional arguments")
    bound = dict(zip(names, args))
    for key in names:
        if key in kwargs:
            bound[key] = kwargs.pop(key)
    flag_values = kwargs.pop("flag_values", FLAGS)
    unsupported = set(kwargs) - _SUPPORTED_EXTRA
    if unsupported:
        raise TypeError(f"DEFINE_{kind}: unsupported argument(s) {sorted(unsupported)}")
    missing = [n for n in names if n not in bound and n != "help"]
    if missing:
        raise TypeError(f"DEFINE_{kind} missing argument(s) {missing}")
    flag = Flag(
        bound["name"],
        bound["default"],
        bound.get("help") or "",
        parse,
        kind,
        boolean=boolean,
        multi=multi,
        short_name=kwargs.get("short_name"),
        check=check(bound) if check else None,
    )
    return flag_values._define(flag, bool(kwargs.get("allow_override")))


def _bounds(lower, upper) -> Callable:
    """The check of a numeric flag's optional bounds."""

    def check(v):
        if lower is not None and v < lower or upper is not None and v > upper:
            raise ValueError(f"{v} is not in the range [{lower}, {upper}]")

    return check


def DEFINE_string(*args, **kwargs) -> Flag:
    """DEFINE_string(name, default, help, flag_values=FLAGS): a string flag."""
    return _new_flag("string", str, args, kwargs)


def DEFINE_integer(*args, lower_bound=None, upper_bound=None, **kwargs) -> Flag:
    """DEFINE_integer(name, default, help, lower_bound=None, upper_bound=None): an int flag."""
    bounds = _bounds(lower_bound, upper_bound)
    return _new_flag("integer", _parse_int, args, kwargs, check=lambda _: bounds)


def DEFINE_float(*args, lower_bound=None, upper_bound=None, **kwargs) -> Flag:
    """DEFINE_float(name, default, help, lower_bound=None, upper_bound=None): a float flag."""
    bounds = _bounds(lower_bound, upper_bound)
    return _new_flag("float", float, args, kwargs, check=lambda _: bounds)


def DEFINE_boolean(*args, **kwargs) -> Flag:
    """DEFINE_boolean(name, default, help): `--name`, `--noname`, `--name=false`."""
    return _new_flag("bool", _parse_bool, args, kwargs, boolean=True)


DEFINE_bool = DEFINE_boolean


def DEFINE_list(*args, **kwargs) -> Flag:
    """DEFINE_list(name, default, help): a comma-separated list of strings."""
    return _new_flag("list", _parse_list, args, kwargs)


def DEFINE_enum(*args, **kwargs) -> Flag:
    """DEFINE_enum(name, default, enum_values, help): one string out of `enum_values`."""

    def check(bound):
        values = list(bound.get("enum_values") or [])
        if not values:
            raise ValueError(f"DEFINE_enum {bound['name']!r}: enum_values must not be empty")

        def one_of(v):
            if v not in values:
                raise ValueError(f"value should be one of <{'|'.join(values)}>")

        return one_of

    return _new_flag("enum", str, args, kwargs, check=check, extra=("enum_values",))


def DEFINE_multi_string(*args, **kwargs) -> Flag:
    """A string flag that may repeat; its value is the list of occurrences."""
    return _new_flag("multi_string", str, args, kwargs, multi=True)


def DEFINE_multi_integer(*args, **kwargs) -> Flag:
    """An int flag that may repeat; its value is the list of occurrences."""
    return _new_flag("multi_integer", _parse_int, args, kwargs, multi=True)


def DEFINE_multi_float(*args, **kwargs) -> Flag:
    """A float flag that may repeat; its value is the list of occurrences."""
    return _new_flag("multi_float", float, args, kwargs, multi=True)


def register_validator(flag_name, checker, message="Flag validation failed", flag_values=FLAGS):
    """`checker(value)` (or, for a list of names, `checker(dict)`) must hold after parsing."""
    names = [flag_name] if isinstance(flag_name, str) else list(flag_name)
    for name in names:
        flag_values[name]  # KeyError for an undefined flag, as absl
    flag_values._validators.append((names, checker, message))


def mark_flag_as_required(flag_name: str, flag_values: FlagValues = FLAGS) -> None:
    """Parsing fails unless the flag ends up with a value other than None."""
    register_validator(
        flag_name,
        lambda v: v is not None,
        f"Flag --{flag_name} must have a value other than None.",
        flag_values,
    )


def mark_flags_as_required(flag_names, flag_values: FlagValues = FLAGS) -> None:
    for name in flag_names:
        mark_flag_as_required(name, flag_values)
