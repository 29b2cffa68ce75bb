"""``profan`` command line: one subcommand per module under ``profan/commands``.

Each command module exposes ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int`` (the exit code).  User errors (``ProfanError``) print one clear message and
exit with the error's code; anything else is a bug in profan and says so.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback

from profan.errors import EXIT_INTERNAL, ProfanError

# Subcommand name -> module under profan.commands, in the order ``--help`` lists them.
COMMANDS: dict[str, str] = {
    "report": "report",
    "check": "check",
    "diff": "diff",
    "annotate": "annotate",
    "hlo": "hlo",
    "chips": "chips",
    "memory": "memory",
    "export": "export",
    "cache": "cache",
}


# Commands that read traces and so take --scheduler (the per-host map on a Dask cluster) and
# --workers (how many hosts are read at once locally).
TRACE_COMMANDS = frozenset({"report", "check", "diff", "annotate"})


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="profan",
        description="How far each op of an XLA program was from what the hardware could do.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(f"profan.commands.{module_name}")
        sub = subparsers.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(sub)
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
        if name in TRACE_COMMANDS:
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
                "per CPU); peak memory grows with N, not with the number of hosts",
            )
        sub.set_defaults(_run=module.run)
    return parser


def _at_least_one(text: str) -> int:
    from profan.trace.executors import parse_worker_count

    try:
        return parse_worker_count(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _use_chip_file(path: str) -> None:
    """Make a user's chip file part of the catalogue for this run (checked now, so a bad file
    fails before any trace is read)."""
    from profan.chips import USER_CHIPS_ENV, read_chip_file

    read_chip_file(path)
    # Every command reads the catalogue through profan.chips.catalogue(), which honours this.
    os.environ[USER_CHIPS_ENV] = str(path)


def _use_kernel_file(path: str) -> None:
    """Make a user's kernel cost models part of the registry for this run (checked now)."""
    from profan.cost.kernels import USER_KERNELS_ENV, read_kernel_file

    read_kernel_file(path)
    # The registry (profan.cost.kernels.registry.registry) honours this.
    os.environ[USER_KERNELS_ENV] = str(path)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if getattr(args, "user_chips", None):
            _use_chip_file(args.user_chips)
        if getattr(args, "user_kernels", None):
            _use_kernel_file(args.user_kernels)
        if getattr(args, "dask_scheduler", None):
            # profan.load reads it (profan.trace.executors.SCHEDULER_ENV), in every command.
            os.environ["PROFAN_SCHEDULER"] = args.dask_scheduler
        if getattr(args, "workers", None):
            # profan.load reads it too (profan.trace.executors.WORKERS_ENV), in every command.
            os.environ["PROFAN_WORKERS"] = str(args.workers)
        return int(args._run(args) or 0)
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
            traceback.print_exc()
        print(
            f"profan: internal error: {type(error).__name__}: {error}\n"
            "This is a bug in profan; rerun with --debug for the traceback and report it.",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
