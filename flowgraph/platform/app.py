"""tf.app: `run(main, argv)` parses the flags and calls `main` (TF 1.15's tf.app.run, which is
absl's app.run with unknown flags tolerated).

    def main(argv):             # argv: [program, *positional args, *flags nobody defined]
        ...
    if __name__ == "__main__":
        tf.app.run()            # main defaults to __main__.main; exits with main's return value
"""

from __future__ import annotations

import sys

from flowgraph.platform import flags

__all__ = ["flags", "run"]

_HELP_ARGS = ("-?", "--help", "-help", "--helpshort", "-helpshort", "--helpfull", "-helpfull")


def _usage(program: str) -> str:
    doc = (sys.modules["__main__"].__doc__ or "").strip()
    head = doc if doc else f"USAGE: {program} [flags]"
    return f"{head}\n\nflags:\n{flags.FLAGS.get_help()}\n"


def run(main=None, argv=None):
    """Parses flags from `argv` (default sys.argv), then `sys.exit(main(remaining_argv))`.

    Flags nobody defined stay in the argv given to `main` (TF's tolerant parser). A flag
    value that does not parse, or a failed validator (`mark_flag_as_required`), prints
    "FATAL Flags parsing error" and exits with status 1; `--help` prints the flags and exits
    with status 1, as absl does.
    """
    main = main if main is not None else sys.modules["__main__"].main
    argv = sys.argv if argv is None else argv
    flag_args = argv[1 : argv.index("--")] if "--" in argv else argv[1:]
    if any(a in _HELP_ARGS for a in flag_args):
        sys.stdout.write(_usage(argv[0] if argv else "program"))
        sys.exit(1)
    try:
        remaining = flags.FLAGS(argv, known_only=True)
    except flags.Error as e:
        sys.stderr.write(f"FATAL Flags parsing error: {e}\nPass --help to see help on flags.\n")
        sys.exit(1)
    sys.exit(main(remaining))
