"""The `fleetform` command: one module per subcommand under fleetform/commands/.

Only the chosen command's module is imported (validate must not pay for jinja2, pulumi or git), so
the subcommands are listed here, in a table as light as argparse itself; each module's
add_parser(sub) adds its arguments and sets args.run.

Exit codes: 0 success, 1 the blueprint or a check failed, 2 usage error (bad arguments, a file
that cannot be read, a missing optional dependency, or an error of the machine such as a full disk),
3 an internal error (a bug in fleetform).
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
    "init": "write a starter blueprint and the files to run `pulumi up` on it",
    "explain": "describe a blueprint field: type, default, values, fields, example",
    "completion": "print a bash or zsh completion script",
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

_output_reported = False
"""Set when a failed write of the standard output has been reported, so run() does not report it twice."""


def _parser_of_process(command: str) -> argparse.ArgumentParser:
    """build_parser, which imports the command's module and all it needs (yaml, jsonschema, ...),
    with the cyclic garbage collector off: what imports make lives until the process exits, so the
    collector would only walk it again and again. Then gc.freeze() moves it to the permanent
    generation, and the collector runs as usual for the command's own work."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return build_parser(command)
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def _usage_exit(argv: list[str]) -> int:
    """The exit code of a usage error: 2, except under `diff --detailed-exitcode`, where 2 means
    "changes", as in terraform plan: any error is 1 there."""
    return EXIT_FAILED if _command(argv) == "diff" and "--detailed-exitcode" in argv else EXIT_USAGE


def main(argv: list[str] | None = None) -> int:
    """Run `fleetform ARGV`; the exit code. While it runs, sys.stdout and sys.stderr are watched
    (see _Watched): a reader that went away or a stream that cannot be written never changes the
    command's verdict, and a failed standard output is reported as such."""
    out, err = sys.stdout, sys.stderr
    watched = sys.stdout = _Watched(out)
    sys.stderr = _Watched(err, quiet=True)
    try:
        return _main(sys.argv[1:] if argv is None else list(argv), watched)
    finally:
        if sys.stdout is watched:
            sys.stdout, sys.stderr = out, err


def _main(argv: list[str], watched: _Watched) -> int:
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
    usage_exit = _usage_exit(argv)
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
    except BrokenPipeError:  # a write around the watched streams (their .buffer) to a reader that went away:
        _discard(sys.stdout)  # the command could not finish, so no verdict: 1, as Python's documentation
        return EXIT_FAILED  # suggests ("Note on SIGPIPE")
    except KeyboardInterrupt:
        return 130
    except Exception as err:  # a bug, never a blueprint problem: those are findings
        if args.debug or os.environ.get("FLEETFORM_DEBUG"):
            raise
        if isinstance(err, OSError) and (watched.failed or err.errno in _MACHINE_ERRORS):
            return _machine_error(err, usage_exit, stdout=watched.failed)
        print(f"fleetform: internal error: {type(err).__name__}: {err}\n"
              "This is a bug in fleetform, not in your blueprint. Run again with --debug for the traceback "
              "and report it.", file=sys.stderr)
        return EXIT_INTERNAL


class _Watched:
    """sys.stdout or sys.stderr while fleetform runs. A reader that went away (`| head`) has what it
    wanted: the rest goes to /dev/null and the command goes on to its verdict, so `validate | head`
    still exits 1 for an invalid blueprint. Any other failed write of stdout is noted, so that the
    OSError is reported as the standard output's (`> /dev/full`), not as a file's or a bug; stderr
    (`quiet`) has nowhere to report its own failure, so its messages are dropped and the exit code
    says what happened. A stream closed before fleetform started (`>&-`, None) takes its text
    nowhere, as asked (print(file=None) would write it to stdout)."""

    def __init__(self, stream, quiet: bool = False):
        self.stream = stream
        self.quiet = quiet
        self.failed = False

    def write(self, text: str) -> int:
        if self.stream is None:
            return len(text)
        try:
            return self.stream.write(text)
        except OSError as err:
            self._failed(err)
            return len(text)

    def flush(self) -> None:
        if self.stream is None:
            return
        try:
            self.stream.flush()
        except OSError as err:
            self._failed(err)

    def _failed(self, err: OSError) -> None:
        if self.quiet or isinstance(err, BrokenPipeError):
            _discard(self.stream)
            return
        self.failed = True
        if _whole_process:  # what stdout still buffers would fail again at exit; a program's stdout stays its own
            _discard(self.stream)
        raise err

    def isatty(self) -> bool:
        return self.stream is not None and self.stream.isatty()

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


_MACHINE_ERRORS = {
    errno.ENOSPC: "free space on that device",
    errno.EDQUOT: "free space within your disk quota",
    errno.EFBIG: "a limit on file size was reached (see `ulimit -f`)",
    errno.EIO: "the device reported an input/output error",
}
"""Errors of the machine, not of fleetform or the blueprint, with what to do. The commands report
their own files' other errors (a folder that cannot be written, a file that cannot be read)."""


def _machine_error(err: OSError, code: int, stdout: bool) -> int:
    global _output_reported
    if stdout:
        where = "cannot write the standard output"
        _output_reported = True
    elif err.filename:
        where = f"cannot write {err.filename}"
    else:
        import tempfile

        where = f"a write failed (temporary files go to {tempfile.gettempdir()}, or where TMPDIR says)"
    hint = _MACHINE_ERRORS.get(err.errno)
    print(f"fleetform: error: {where}: {err.strerror}" + (f"; {hint}" if hint else ""),
          file=sys.stderr if isinstance(sys.stderr, _Watched) else _Watched(sys.stderr, quiet=True))
    return code


def _discard(stream) -> None:
    """Send what the stream still buffers, and anything written to it later, to /dev/null."""
    try:
        fd = stream.fileno()
    except (AttributeError, ValueError, OSError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def run() -> None:
    """The installed `fleetform` script: main(), then the process's exit.

    Python's own exit tears the interpreter down, freeing one by one every object the imports made:
    14 ms of the 100 of `python -c 'import yaml, jsonschema'`, and more for a command that imported
    more (benchmarks/startup.py). The operating system reclaims a process's memory whole, so when
    the interpreter has nothing left to do at exit but its atexit callbacks (logging and
    weakref.finalize register one, and so tempfile's TemporaryDirectory; plan's imports do), those
    run here and the command ends at once, its output flushed: when no other thread runs
    (concurrent.futures' workers, which it joins at exit) and no interactive prompt waits (`python -i`).
    Otherwise Python exits as usual. A command must close the files it writes before it returns (with-blocks or raw
    descriptors, as every command does): os._exit flushes no Python buffer but stdout's and stderr's."""
    global _whole_process
    _whole_process = True
    try:
        code = main()
    except SystemExit as err:  # --help, --version
        if not (err.code is None or isinstance(err.code, int)):
            raise
        code = err.code or 0
    for stream in (sys.stdout, sys.stderr):
        if stream is None:  # closed when fleetform started (`>&-`)
            continue
        try:
            stream.flush()
        except BrokenPipeError:  # the reader has what it wanted
            _discard(stream)
        except OSError as err:
            _discard(stream)
            if stream is sys.stdout and not _output_reported:
                code = _machine_error(err, _usage_exit(sys.argv[1:]), stdout=True)
    if _nothing_at_exit():
        os._exit(code)
    sys.exit(code)


def _nothing_at_exit() -> bool:
    """True when exiting needs no more than the flush already done: one thread, no interactive prompt
    to come, and the atexit callbacks run here, as Python's exit would run them (plan's imports
    register logging's and certifi's; no other thread is left to run after them). Without CPython's
    atexit._run_exitfuncs, exit as usual when any is registered."""
    import atexit

    threading = sys.modules.get("threading")
    if sys.flags.inspect or (threading is not None and threading.active_count() != 1):
        return False
    callbacks, run_them = getattr(atexit, "_ncallbacks", None), getattr(atexit, "_run_exitfuncs", None)
    if callbacks is None or (callbacks() and run_them is None):
        return False
    if callbacks():
        run_them()  # each one once, last registered first; an exception is printed, the exit code kept
        for stream in (sys.stdout, sys.stderr):  # what they printed
            try:
                if stream is not None:
                    stream.flush()
            except OSError:
                _discard(stream)
    return True


if __name__ == "__main__":  # pragma: no cover
    run()
