"""fleetform render BLUEPRINT [-o DIR] [--check]: the rendered files, written atomically or checked."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from ..findings import Severity, fresh, printed, summary_line, unique
from ..pipeline import check

PLAN_FILES = ("plan.json", "plan.md")
"""Written into the same folder by `fleetform plan -o`; render neither checks nor removes them."""

MANIFEST_LIMIT = 64 * 1024 * 1024
"""Most bytes of an existing manifest.json read to tell whether a folder is fleetform's."""


def add_parser(sub) -> None:
    p = sub.add_parser("render",
                       description="Validate a blueprint and render its files into DIR (default "
                                   "rendered/<metadata.name>/), replacing what was there. With --check, write "
                                   "nothing: exit 1 and list the files that are stale, missing or extra.")
    p.add_argument("blueprints", nargs="+", metavar="BLUEPRINT",
                   help="blueprint files; several only without -o (each goes to rendered/<metadata.name>)")
    p.add_argument("-o", "--output", metavar="DIR", help="output folder (default: rendered/<metadata.name>)")
    p.add_argument("--check", action="store_true", help="compare with DIR instead of writing it")
    p.set_defaults(run=run)


def run(args) -> int:
    from ..cli import UsageError

    if args.output and len(args.blueprints) > 1:
        raise UsageError("-o takes one blueprint; without -o each renders to rendered/<metadata.name>/")
    results = []
    targets: dict[str, str] = {}
    for blueprint in args.blueprints:
        try:
            result = check(blueprint, display=blueprint)
        except OSError as err:
            raise UsageError(f"cannot read {blueprint}: {err.strerror or err}") from None
        if result.model is not None:
            out = Path(args.output) if args.output else Path("rendered") / result.model.name
            real = os.path.realpath(out)  # not Path.resolve(): a symlink loop is the write's to report
            if real in targets:  # checked before anything is written
                raise UsageError(f"{blueprint} and {targets[real]} both render to {out}/ (the same "
                                 "metadata.name); give one another name, or render them one at a time with -o")
            targets[real] = blueprint
        results.append((blueprint, result))
    status = 0
    seen: set[tuple] = set()  # findings printed for an earlier blueprint (a base they share): once per run
    for blueprint, result in results:
        status = max(status, _one(blueprint, result, args, seen))
    return status


def _ours(out: Path, name: str) -> bool:
    """Whether out is empty, or a folder fleetform rendered for this blueprint name: only then may
    render replace it (it swaps the whole folder). A manifest.json that is not a regular file (a
    symlink, a FIFO) is not fleetform's."""
    from ..render.output import read_regular

    if not out.exists() or (out.is_dir() and not any(out.iterdir())):
        return True
    try:
        manifest = json.loads(read_regular(out / "manifest.json", MANIFEST_LIMIT) or b"")
        return manifest["blueprint"]["name"] == name and manifest["tool"]["name"] == "fleetform"
    except (ValueError, KeyError, TypeError):
        return False


def _current_plan(out: Path, sha256: str) -> tuple[str, ...]:
    """The plan files in out that belong to this exact blueprint (same sha256); others are stale."""
    from ..render.output import read_regular

    try:
        plan = json.loads(read_regular(out / "plan.json") or b"")
    except (ValueError, OSError):
        return ()
    return PLAN_FILES if isinstance(plan, dict) and plan.get("blueprint", {}).get("sha256") == sha256 else ()


def _one(blueprint: str, result, args, seen: set[tuple]) -> int:
    from ..cli import UsageError
    from ..render import render
    from ..render.output import OutputError

    if result.model is None:
        shown, rest = printed(fresh(result.findings, seen))
        lines = [f.to_text() for f in shown] + ([rest] if rest else []) + [summary_line(unique(result.findings), 1)]
        sys.stdout.write("".join(f"{line}\n" for line in lines))
        sys.stdout.write("nothing rendered: fix the errors above\n")
        return 1
    shown, rest = printed(fresh((f for f in result.findings if f.severity is Severity.WARNING), seen))
    summary = summary_line(unique(result.findings), 1, result.waived)
    sys.stdout.write("".join(f"{line}\n" for line in [f.to_text() for f in shown] + ([rest] if rest else []) + [summary]))
    files = render(result.model)
    out = Path(args.output) if args.output else Path("rendered") / result.model.name
    try:
        return _output(files, out, blueprint, result.model, args)
    except OutputError as err:
        raise UsageError(str(err)) from None
    except OSError as err:  # reading the folder before the write (its listing, its manifest)
        raise UsageError(f"cannot read {err.filename or out}: {err.strerror or err}") from None


def _output(files: dict[str, bytes], out: Path, blueprint: str, model, args) -> int:
    from ..cli import UsageError
    from ..render.output import compare, write

    current_plan = _current_plan(out, model.sha256)
    if args.check:
        drift = compare(files, out, ignore=current_plan)
        for label, paths in (("stale", drift.stale), ("missing", drift.missing), ("extra", drift.extra)):
            for path in paths:
                why = drift.why.get(path) if label == "stale" else None
                shown = f"{out / path}/" if path.endswith("/") else f"{out / path}"  # an empty folder
                sys.stdout.write(f"{label}: {shown}{': ' + why if why else ''}\n")
        if drift.clean:
            sys.stdout.write(f"{out}: {len(files)} files up to date\n")
            return 0
        count = len(drift.stale) + len(drift.missing) + len(drift.extra)
        sys.stdout.write(f"{out}: {count} file{'s' if count != 1 else ''} out of date; "
                         f"run `fleetform render {blueprint}{' -o ' + args.output if args.output else ''}`\n")
        return 1
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out} exists and is not a folder")

    def guard(real: Path) -> tuple[str, ...]:
        """Run under the folder's lock: the folder as it is now, not as it was before the lock."""
        from ..render.output import OutputError

        if not _ours(real, model.name):
            raise OutputError(f"{out} holds files fleetform did not render for {model.name}, and rendering "
                              "replaces the whole folder; choose an empty folder or the default rendered/<name>/")
        return _current_plan(real, model.sha256)

    write(files, out, guard=guard)
    sys.stdout.write(f"rendered {len(files)} files to {out}/\n")
    return 0
