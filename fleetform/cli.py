"""The `fleetform` command: one module per subcommand under fleetform/commands/.

Only the chosen command's module is imported (validate must not pay for jinja2, pulumi or git), so
the subcommands are listed here, in a table as light as argparse itself; each module's
add_parser(sub) adds its arguments and sets args.run.

Exit codes: 0 success, 1 the blueprint or a check failed, 2 usage error (bad arguments, a file
that cannot be read, a missing optional dependency), 3 an internal error (a bug in fleetform).
"""

from __future__ import annotations

import argparse
import errno
import gc
import os
import sys

from . import __version__

COMMANDS = {
    "validate": "check blueprints: all errors and warnings, then a summary",
    "render": "render Slurm, NCCL and Kubernetes files from a blueprint",
    "plan": "sizing, cost and the cloud resources of a blueprint, with security policies",
    "diff": "what changes between two blueprints: files, resources, cost, findings",
    "schema": "print the blueprint JSON Schema (Draft 2020-12)",
    "catalog": "list GPU instance types with GPU facts and prices",
    "rules": "list the checks fleetform makes",
}
"""Every subcommand (fleetform/commands/<name>.py) with its one-line help, in the order --help lists them."""

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3

DEBUG_HELP = "show the traceback of an internal error (as FLEETFORM_DEBUG=1 does)"


class UsageError(Exception):
    """A problem with how fleetform was called; exit 2."""


class _Subcommands:
    """The subparsers action as a command module sees it: its one-line help comes from COMMANDS."""

    def __init__(self, sub):
        self._sub = sub

    def add_parser(self, name: str, **kwargs) -> argparse.ArgumentParser:
        parser = self._sub.add_parser(name, help=COMMANDS[name], formatter_class=_Formatter, **kwargs)
        parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP)
        return parser


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """argparse's formatter at the terminal's width, found as shutil.get_terminal_size finds it but
    without importing shutil (and the compression modules it imports), which --help would pay for;
    descriptions and epilogs are kept as written (the command list is laid out here)."""

    def __init__(self, prog: str):
        try:
            columns = int(os.environ["COLUMNS"])
        except (KeyError, ValueError):
            try:
                columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
            except (AttributeError, ValueError, OSError):
                columns = 80
        super().__init__(prog, width=max(columns, 40) - 2)


class _TopFormatter(argparse.RawTextHelpFormatter, _Formatter):
    """`fleetform --help`: the few argument helps there are written to fit 80 columns and printed as
    written, like the command list below them. Wrapping them would import textwrap, which compiles
    its regular expressions at import: 1 ms, a tenth of what the bare interpreter with argparse
    costs (issue 13 sets --help at most 1.1x that). Each command's own --help wraps as usual."""


def _command_list() -> str:
    width = max(len(name) for name in COMMANDS)
    return "commands:\n" + "\n".join(f"  {name.ljust(width)}  {text}" for name, text in COMMANDS.items())


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of `fleetform COMMAND`: only that command's module is imported and its parser built
    (every command's with command=None, for tests and documentation). --help lists the commands from
    COMMANDS, without building a parser for each (argparse's per-parser cost is most of --help's)."""
    parser = argparse.ArgumentParser(
        prog="fleetform",
        formatter_class=_TopFormatter,
        description="Validate GPU fleet blueprints and render them into Slurm, NCCL, Kubernetes and Pulumi.",
        epilog=_command_list() + "\n\nRun `fleetform COMMAND --help` for a command's arguments. Exit codes: 0 "
               "success, 1 the blueprint\nor a check failed, 2 a usage error, 3 a bug in fleetform.",
    )
    parser.add_argument("--version", action="version", version=f"fleetform {__version__}")
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, help="one of the commands below")
    for name in COMMANDS:
        if command is None or name == command:
            _module(name).add_parser(_Subcommands(sub))
    return parser


def _module(name: str):
    from importlib import import_module

    return import_module(f".commands.{name}", __package__)


def _command(argv: list[str]) -> str | None:
    """The subcommand word of argv: its first argument that is not an option (the global options
    take no value)."""
    for arg in argv:
        if arg == "--":
            return None
        if not arg.startswith("-"):
            return arg
    return None


_whole_process = False
"""Set by run(): main() runs as the whole `fleetform` process, not called by a program or a test."""


def _parser_of_process(command: str) -> argparse.ArgumentParser:
    """build_parser, which imports the command's module and all it needs (yaml, jsonschema, ...),
    with the cyclic garbage collector off: what imports make lives until the process exits, so the
    collector would only walk it again and again. Then gc.freeze() moves it to the permanent
    generation, and the collector runs as usual for the command's own work."""
    gc.disable()
    try:
        return build_parser(command)
    finally:
        gc.freeze()
        gc.enable()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = _command(argv)
    if command is not None and command not in COMMANDS:
        from difflib import get_close_matches

        close = get_close_matches(command, COMMANDS, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else f"; the commands are {', '.join(COMMANDS)}"
        build_parser("").error(f"unknown command {command!r}{hint}")
    parser = _parser_of_process(command or "") if _whole_process else build_parser(command or "")
    if command is None and not {"-h", "--help", "--version"} & set(argv):
        parser.print_help(sys.stderr)  # `fleetform` alone: the whole help, as a usage error
        return EXIT_USAGE
    # `diff --detailed-exitcode` gives 2 the meaning "changes", like terraform plan: any error is 1 there
    usage_exit = EXIT_FAILED if command == "diff" and "--detailed-exitcode" in argv else EXIT_USAGE
    try:
        args = parser.parse_args(argv)
    except SystemExit as err:
        if err.code == EXIT_USAGE:
            return usage_exit
        raise
    try:
        return args.run(args)
    except UsageError as err:
        print(f"fleetform: error: {err}", file=sys.stderr)
        return usage_exit
    except BrokenPipeError:  # `fleetform schema | head`
        _discard_output()
        return EXIT_OK
    except KeyboardInterrupt:
        return 130
    except Exception as err:  # a bug, never a blueprint problem: those are findings
        if isinstance(err, OSError) and err.errno in _OUTPUT_ERRNOS:  # the commands report their own files'
            return _output_failed(err, usage_exit)
        if args.debug or os.environ.get("FLEETFORM_DEBUG"):
            raise
        print(f"fleetform: internal error: {type(err).__name__}: {err}\n"
              "This is a bug in fleetform, not in your blueprint. Run again with --debug for the traceback "
              "and report it.", file=sys.stderr)
        return EXIT_INTERNAL


def run() -> None:
    """The installed `fleetform` script: main(), then the process's exit.

    Python's own exit tears the interpreter down, freeing one by one every object the imports made:
    14 ms of the 100 of `python -c 'import yaml, jsonschema'`, and more for a command that imported
    more (benchmarks/startup.py). The operating system reclaims a process's memory whole, so when the
    interpreter has nothing left to do at exit, the command ends at once: its output flushed, no
    callback registered with atexit (logging, concurrent.futures and weakref.finalize register them;
    plan's Pulumi engine does), no other thread running. Otherwise Python exits as usual."""
    global _whole_process
    _whole_process = True
    try:
        code = main()
    except SystemExit as err:  # --help, --version
        if not (err.code is None or isinstance(err.code, int)):
            raise
        code = err.code or 0
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # the reader has what it wanted
        _discard_output()
    except OSError as err:
        code = _output_failed(err, EXIT_USAGE)
    if _nothing_at_exit():
        os._exit(code)
    sys.exit(code)


_OUTPUT_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO)
"""Errors of writing the standard output (`> /dev/full`, a full disk): the machine's, not fleetform's."""


def _discard_output() -> None:
    """Send what is still buffered for stdout, and anything written later, to /dev/null."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _output_failed(err: OSError, code: int) -> int:
    _discard_output()
    print(f"fleetform: error: cannot write the standard output: {err.strerror}; free space on its device or "
          "write it elsewhere", file=sys.stderr)
    return code


def _nothing_at_exit() -> bool:
    """True when exiting needs no more than the flush already done: no atexit callback, one thread."""
    import atexit

    callbacks = getattr(atexit, "_ncallbacks", None)  # CPython's count; without it, exit as usual
    threading = sys.modules.get("threading")
    return callbacks is not None and callbacks() == 0 and (threading is None or threading.active_count() == 1)


if __name__ == "__main__":  # pragma: no cover
    run()
