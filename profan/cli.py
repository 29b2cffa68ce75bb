"""``profan`` command line: one subcommand per module under ``profan/commands``.

``COMMANDS`` names each subcommand, the module that runs it and the one line ``--help`` lists,
so ``profan --help`` imports no command: only the command that runs is imported (with pandas
and the pipeline it needs).  A command module exposes ``add_arguments(parser)`` and
``run(args) -> int`` (the exit code).  User errors (``ProfanError``) print one clear message and
exit with the error's code; anything else is a bug in profan and says so.

The options every command that reads or costs traces takes (``--chips``, ``--kernels``,
``--workers``, ``--scheduler``, ``--no-cache``) are added here and made into one
``RunOptions`` (their environment variables standing in for those not given), which the command
is handed with the user's tables in force: ``run(args, options) -> int``.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import importlib
import os
import signal
import sys
from typing import TYPE_CHECKING, NamedTuple, NoReturn

from profan.errors import EXIT_INTERNAL, ProfanError
from profan.version import __version__

if TYPE_CHECKING:
    from profan.trace.options import RunOptions


class Command(NamedTuple):  # (a named tuple: made at every start, ~5x faster than a dataclass)
    help: str  # the line ``profan --help`` lists
    reads_traces: bool = False  # takes --scheduler, --workers (how hosts are read), --no-cache
    costs: bool = True  # takes --chips and --kernels (chip figures, custom calls' costs)


TRACES = True  # Command(..., TRACES): the command reads traces

# Subcommand name -> its command (run by module ``profan.commands.<name>``, imported only when
# it runs), in the order ``--help`` lists them.  A new command is one more line here.
COMMANDS: dict[str, Command] = {
    "report": Command("where a profile's time went, op by op against its roofline", TRACES),
    "check": Command("check a profile against budgets and a baseline (exit 1 if not)", TRACES),
    "diff": Command("compare two profiles or JSON reports: step time, top changes", TRACES),
    "annotate": Command("a module's HLO with each op's measured and ideal time, flags", TRACES),
    "hlo": Command("summarise an HLO text dump or an XProf op profile: ops, collectives, cost"),
    "chips": Command("the chips profan knows: peaks, HBM, interconnect, and sources"),
    "memory": Command("where device memory goes: peak, live buffers, donation, headroom"),
    "export": Command("profan's figures on every op event: annotated xplane, Chrome JSON", TRACES),
    "whatif": Command("the step projected onto another chip or a recompiled program", TRACES),
    "cache": Command(
        "show or clear profan's cache of loaded profiles, reports and parsed HLO", costs=False
    ),
}


def chosen_command(argv: list[str]) -> str | None:
    """The subcommand ``argv`` names: its first word that is not an option (the top-level
    options take no values)."""
    for word in argv:
        if word == "--":
            return None
        if not word.startswith("-"):
            return word
    return None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of the top level and of every subcommand's name and help line; only
    ``command``'s arguments are added (importing its module), so ``profan --help`` and every
    command import no other command."""
    parser = argparse.ArgumentParser(
        prog="profan",
        description="How far each op of an XLA program was from what the hardware could do.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    parser.add_argument("--version", action="version", version=f"profan {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name, spec in COMMANDS.items():
        sub = subparsers.add_parser(name, help=spec.help, description=spec.help)
        if name == command:
            _add_command_arguments(sub, name, spec)
    return parser


def _add_command_arguments(sub: argparse.ArgumentParser, name: str, spec: Command) -> None:
    module = importlib.import_module(f"profan.commands.{name}")
    module.add_arguments(sub)
    sub.set_defaults(_run=module.run)
    if not spec.costs:  # (an option that means nothing to a command is not offered)
        return
    if "--chips" not in sub._option_string_actions:
        sub.add_argument(
            "--chips",
            metavar="FILE",
            dest="user_chips",
            help="a TOML file of extra chips (same schema as profan/data/chips.toml)",
        )
    sub.add_argument(
        "--kernels",
        metavar="FILE",
        dest="user_kernels",
        help="a TOML file of cost models for custom calls profan does not know (same "
        "schema as profan/data/kernels.toml; `profan report` prints an example entry)",
    )
    if spec.reads_traces:
        sub.add_argument(
            "--scheduler",
            metavar="ADDRESS",
            dest="dask_scheduler",
            help="read the hosts on this Dask scheduler's workers (default: $PROFAN_SCHEDULER,"
            " else local processes; extra [dask])",
        )
        sub.add_argument(
            "--workers",
            metavar="N",
            type=_at_least_one,
            help="hosts read at once by local processes (default: $PROFAN_WORKERS, else one "
            "per CPU; one big host is shared out to idle CPUs); peak memory grows with N, not "
            "with the number of hosts",
        )
        sub.add_argument(
            "--no-cache",
            action="store_true",
            help="read the trace again and keep nothing: neither use nor fill profan's cache "
            "(see `profan cache info`)",
        )


def _at_least_one(text: str) -> int:
    from profan.trace.options import parse_worker_count

    try:
        return parse_worker_count(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def run_options(args: argparse.Namespace) -> RunOptions:
    """The command's ``RunOptions``: its options as given, their environment variables for
    those it leaves out (read here, once; ``--no-cache`` has none)."""
    from profan.trace.options import RunOptions

    spec = COMMANDS[args.command]
    return RunOptions.from_environment(
        costs=spec.costs,
        reads_traces=spec.reads_traces,
        chips=getattr(args, "user_chips", None),
        kernels=getattr(args, "user_kernels", None),
        workers=getattr(args, "workers", None),
        scheduler=getattr(args, "dask_scheduler", None),
        use_cache=not getattr(args, "no_cache", False),
    )


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    # Importing the command's modules makes objects that live to the end: the collector's
    # passes over them find nothing, so it pauses meanwhile (~3 ms of a report re-opened from
    # the cache).
    collecting = gc.isenabled()
    gc.disable()
    try:
        args = build_parser(chosen_command(words)).parse_args(words)
    finally:
        if collecting:
            gc.enable()
    try:
        from profan.inputs import check_inputs
        from profan.trace.options import CHIPS_ENV, KERNELS_ENV

        # a device or FIFO among the inputs would hang the command: refused before any is read
        check_inputs(
            args, [(os.environ.get(name, ""), f"${name}") for name in (CHIPS_ENV, KERNELS_ENV)]
        )
        options = run_options(args)
        # the tables are read and checked now: a file that cannot be read is not ignored
        with options.in_force():
            return int(args._run(args, options) or 0)
    except ProfanError as error:
        print(f"profan: error: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print("profan: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # Output piped into `head` and closed early: not an error.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as error:  # a bug in profan, not the user's fault
        if args.debug:
            import traceback

            traceback.print_exc()
        print(
            f"profan: internal error: {type(error).__name__}: {error}\n"
            "This is a bug in profan; rerun with --debug for the traceback and report it.",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


# What a SIGTERM stops at once beside this process: module, function (only when imported).
_STOPPED_ON_TERM = (("profan.trace.workers", "stop_workers"),)  # every worker process


def _terminated(signum: int, frame: object) -> NoReturn:
    """SIGTERM (``timeout``, CI runners, systemd): kill the command's workers and leave now,
    exit 143 (128 + 15) as a shell reports it.  (Workers also die with this process by
    themselves: ``profan.trace.workers.die_with_parent``.)"""
    for module_name, function in _STOPPED_ON_TERM:
        module = sys.modules.get(module_name)
        if module is not None:
            getattr(module, function)()
    os.write(2, b"profan: terminated (SIGTERM)\n")
    os._exit(128 + signal.SIGTERM)


def run() -> NoReturn:
    """The ``profan`` program: ``main`` on the command line, then out without the interpreter's
    teardown, which frees every object of the run one at a time (~0.13 s of a cold report of
    the benchmark trace, paired).  By then the command is done: its files closed, its cache
    writes and worker processes waited for (a thread still running takes the usual way out).
    The output is flushed and the exit handlers run as at any exit.

    The cyclic collector is off for the whole command: most of a command's objects live until
    it returns, so its passes over them (~0.05 s of a cold report of the benchmark trace) free
    next to nothing (the same peak RSS without them).  Reading host after host turns it back on
    meanwhile (``profan.trace.executors.map_hosts``)."""
    gc.disable()
    signal.signal(signal.SIGTERM, _terminated)
    code = main()
    import threading  # here, not at the top: start-up does without it

    if threading.active_count() > 1:
        sys.exit(code)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # the reader left (`| head`): not an error, as in ``main``
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except OSError:
        sys.exit(code)  # a full disk and the like: the usual way out reports it
    atexit._run_exitfuncs()  # (logging's and multiprocessing's, when they were imported)
    os._exit(code)


if __name__ == "__main__":
    run()
