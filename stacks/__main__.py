"""The Pulumi program users run `pulumi up` in: validate the blueprint named by the stack config
key fleetform:blueprint, render its files, and build its fleets on AWS.

A blueprint with errors stops the program before any resource exists, with the same findings
`fleetform validate` prints.
"""

from pathlib import Path

import pulumi

from fleetform.findings import report_text
from fleetform.pipeline import check
from fleetform.providers.aws.program import build
from fleetform.render import render

config = pulumi.Config("fleetform")
blueprint = Path(config.require("blueprint"))
if not blueprint.is_absolute():
    blueprint = Path(__file__).resolve().parent / blueprint
result = check(blueprint, display=str(blueprint))
if result.model is None:
    raise pulumi.RunError("the blueprint has errors; nothing was built:\n" + report_text(result.findings, 1))
build(result.model, render(result.model))
