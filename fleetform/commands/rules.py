"""fleetform rules: every rule id with its severity, stage and summary."""

from __future__ import annotations

import json
import sys

from ..rules import all_rules


def add_parser(sub) -> None:
    p = sub.add_parser("rules",
                       description="List every rule id with its severity, the stage that checks it, and what it "
                                   "checks. Warning-level rules can be waived in a blueprint's waivers.")
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    p.set_defaults(run=run)


def run(args) -> int:
    rows = list(all_rules())
    if args.format == "json":
        data = [{"id": r.id, "severity": r.severity.value, "stage": r.stage, "summary": r.summary,
                 "needs": list(r.needs)} for r in rows]
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
        return 0
    width = max(len(r.id) for r in rows)
    lines = [f"{'RULE'.ljust(width)}  {'SEVERITY':8}  {'STAGE':7}  CHECKS"]
    lines += [f"{r.id.ljust(width)}  {r.severity.value:8}  {r.stage:7}  {r.summary}" for r in rows]
    sys.stdout.write("\n".join(lines) + "\n")
    return 0
