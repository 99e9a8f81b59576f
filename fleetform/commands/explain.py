"""fleetform explain PATH: a blueprint field's type, default, allowed values, description, fields and an
example, from the JSON Schema (fleetform/explain.py)."""

from __future__ import annotations

import json
import sys


def add_parser(sub) -> None:
    p = sub.add_parser("explain",
                       description="Describe a blueprint field, as the JSON Schema does: its type, default, allowed "
                                   "values, description, its own fields (required ones marked) and an example. PATH "
                                   "is dot-separated: fleets.models.autoscale, fleets[0].models, storage[type=s3] "
                                   "(the branch of a discriminator); `.` is the whole blueprint.",
                       epilog="examples:\n  fleetform explain fleets.models.autoscale\n"
                              "  fleetform explain 'fleets[].scheduler[type=kubernetes]'\n"
                              "  fleetform explain provider.network --format json")
    p.add_argument("path", metavar="PATH", help="the field, e.g. fleets.models.autoscale")
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    p.set_defaults(run=run)


def run(args) -> int:
    from ..cli import UsageError
    from ..explain import ExplainError, explain, text

    try:
        data = explain(args.path)
    except ExplainError as err:
        raise UsageError(str(err)) from None
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n" if args.format == "json" else text(data))
    return 0
