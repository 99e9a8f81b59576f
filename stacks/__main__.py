"""The Pulumi program users run `pulumi up` in: validate the blueprint named by the stack config
key fleetform:blueprint, render its files, and build its fleets on AWS.

A blueprint with errors stops the program before any resource exists, with the same findings
`fleetform validate` prints; so does a stack whose AWS region is not the blueprint's.
"""

import os
from pathlib import Path

import pulumi

from fleetform.findings import report_text
from fleetform.pipeline import check
from fleetform.providers.aws.common import ClusterIdError, cluster_id
from fleetform.providers.aws.program import build
from fleetform.render import render

config = pulumi.Config("fleetform")
blueprint = Path(config.require("blueprint"))
if not blueprint.is_absolute():
    blueprint = Path(__file__).resolve().parent / blueprint
result = check(blueprint, display=str(blueprint))
if result.model is None:
    raise pulumi.RunError("the blueprint has errors; nothing was built:\n" + report_text(result.findings, 1))
model = result.model
if model.cloud == "aws":
    # the AWS provider builds in aws:region (or AWS_REGION); a blueprint sized, priced and zoned for
    # another region must not land there silently
    region = pulumi.Config("aws").get("region") or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    if region != model.region:
        where = f"the stack builds in {region}" if region else "the stack names no AWS region"
        raise pulumi.RunError(f"{blueprint}: the blueprint's provider.region is {model.region}, but {where}; "
                              f"run `pulumi config set aws:region {model.region}`. Nothing was built.")
    try:
        cluster_id(model)
    except ClusterIdError as error:
        raise pulumi.RunError(f"{blueprint}: {error}. Nothing was built.") from None
build(model, render(model))
