"""fleetform render BLUEPRINT [-o DIR] [--check]: the rendered files, written atomically or checked."""

from __future__ import annotations

import sys
from pathlib import Path

from ..findings import Severity, report_text
from ..pipeline import check

PLAN_FILES = ("plan.json", "plan.md")
"""Written into the same folder by `fleetform plan -o`; render neither checks nor removes them."""


def add_parser(sub) -> None:
    p = sub.add_parser("render", help="render Slurm, NCCL and Kubernetes files from a blueprint",
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
    status = 0
    for blueprint in args.blueprints:
        status = max(status, _one(blueprint, args))
    return status


def _one(blueprint: str, args) -> int:
    from ..cli import UsageError
    from ..render import render
    from ..render.output import compare, write

    try:
        result = check(blueprint, display=blueprint)
    except OSError as err:
        raise UsageError(f"cannot read {blueprint}: {err.strerror or err}") from None
    if result.model is None:
        sys.stdout.write(report_text(result.findings, 1))
        sys.stdout.write("nothing rendered: fix the errors above\n")
        return 1
    warnings = [f for f in result.findings if f.severity is Severity.WARNING]
    for finding in sorted(warnings, key=lambda f: f.sort_key()):
        sys.stdout.write(finding.to_text() + "\n")
    files = render(result.model)
    out = Path(args.output) if args.output else Path("rendered") / result.model.name
    if args.check:
        drift = compare(files, out, ignore=PLAN_FILES)
        for label, paths in (("stale", drift.stale), ("missing", drift.missing), ("extra", drift.extra)):
            for path in paths:
                sys.stdout.write(f"{label}: {out / path}\n")
        if drift.clean:
            sys.stdout.write(f"{out}: {len(files)} files up to date\n")
            return 0
        count = len(drift.stale) + len(drift.missing) + len(drift.extra)
        sys.stdout.write(f"{out}: {count} file{'s' if count != 1 else ''} out of date; "
                         f"run `fleetform render {blueprint}{' -o ' + args.output if args.output else ''}`\n")
        return 1
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out} exists and is not a folder")
    write(files, out, keep=PLAN_FILES)
    sys.stdout.write(f"rendered {len(files)} files to {out}/\n")
    return 0
