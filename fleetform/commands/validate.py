"""fleetform validate BLUEPRINT...: every error and warning, then a summary line."""

from __future__ import annotations

import sys

from ..findings import report_github, report_json, report_text
from ..pipeline import check


def add_parser(sub) -> None:
    p = sub.add_parser("validate",
                       description="Check blueprints against the schema and fleetform's rules. "
                                   "Exit 0 when no error was found (warnings allowed), 1 otherwise.")
    p.add_argument("blueprints", nargs="+", metavar="BLUEPRINT", help="blueprint YAML files")
    p.add_argument("--format", choices=("text", "json", "github"), default="text",
                   help="text (one compiler-style line per problem), json (the same as data) or github (GitHub "
                        "Actions annotations at each line) (default: text)")
    p.set_defaults(run=run)


def run(args) -> int:
    from ..cli import UsageError

    findings = []
    waived = 0
    ok = True
    unreadable = []
    for path in args.blueprints:
        try:
            result = check(path, display=path)
        except OSError as err:  # the others are still checked: every problem in one run
            unreadable.append(f"cannot read {path}: {err.strerror or err}")
            continue
        findings.extend(result.findings)
        waived += result.waived
        ok = ok and result.ok
    report = {"json": report_json, "github": report_github}.get(args.format, report_text)
    checked = len(args.blueprints) - len(unreadable)
    if checked:
        sys.stdout.write(report(findings, checked, waived))
    if unreadable:
        sys.stdout.flush()
        raise UsageError("; ".join(unreadable))
    return 0 if ok else 1
