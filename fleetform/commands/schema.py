"""fleetform schema: print the JSON Schema of apiVersion fleetform/v1."""

from __future__ import annotations

import sys

from .. import schema as schema_module


def add_parser(sub) -> None:
    p = sub.add_parser("schema",
                       description="Print the JSON Schema of apiVersion fleetform/v1, for editors and other tools.")
    p.set_defaults(run=run)


def run(args) -> int:
    sys.stdout.write(schema_module.schema_text())
    return 0
