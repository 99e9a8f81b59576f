"""The Pulumi program, shipped in the fleetform package: validate the blueprint that the stack config key
fleetform:blueprint names, render its files, and build its fleets on AWS.

A Pulumi project runs it from a short `__main__.py` beside its Pulumi.yaml (`fleetform init` writes it,
and stacks/ in fleetform's own repository has the same):

    from pathlib import Path
    from fleetform.pulumi_program import main
    main(Path(__file__).parent)

A relative fleetform:blueprint is read from that folder (main() without it: the project's folder). A blueprint with
errors stops the program before any resource exists, with the same findings `fleetform validate` prints;
so does a stack whose AWS region is not the blueprint's, or a Kubernetes Secret whose value is not set.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

import pulumi

from .cidrs import covers_internet
from .findings import report_text
from .pipeline import check
from .providers.aws.common import ClusterIdError, cluster_id
from .providers.aws.deployer import deployer_cidr
from .providers.aws.inference import secret_config_keys
from .providers.aws.kube import deployer_open_message
from .providers.aws.program import build
from .render import render


def project_root() -> Path:
    """The folder of Pulumi.yaml, as the engine tells the program (pulumi.get_root_directory); where no
    engine says (Pulumi's mocks), the working directory, which `pulumi up` sets to the project's folder."""
    try:
        root = pulumi.get_root_directory()
    except AttributeError:  # an SDK before get_root_directory
        root = None
    return Path(root) if root else Path.cwd()


def main(root: str | Path | None = None) -> None:
    """Build the blueprint of the stack config; root: the folder a relative fleetform:blueprint is read from
    (default: project_root())."""
    config = pulumi.Config("fleetform")
    blueprint = Path(config.require("blueprint"))
    if not blueprint.is_absolute():
        blueprint = Path(root if root is not None else project_root()).resolve() / blueprint
    result = check(blueprint, display=str(blueprint))
    if result.model is None:
        raise pulumi.RunError("the blueprint has errors; nothing was built:\n" + report_text(result.findings, 1))
    model = result.model
    if model.cloud == "aws":
        # the AWS provider builds in aws:region (or AWS_REGION); a blueprint sized, priced and zoned for
        # another region must not land there silently
        region = (pulumi.Config("aws").get("region") or os.environ.get("AWS_REGION")
                  or os.environ.get("AWS_DEFAULT_REGION"))
        if region != model.region:
            where = f"the stack builds in {region}" if region else "the stack names no AWS region"
            raise pulumi.RunError(f"{blueprint}: the blueprint's provider.region is {model.region}, but {where}; "
                                  f"run `pulumi config set aws:region {model.region}`. Nothing was built.")
        try:
            cluster_id(model)
        except ClusterIdError as error:
            raise pulumi.RunError(f"{blueprint}: {error}. Nothing was built.") from None
    deployer = None
    if model.cluster is not None:
        # every Kubernetes Secret the models read is created from a Pulumi secret: all must be set before
        # anything is built
        missing = [key for key in secret_config_keys(model)
                   if pulumi.Config("fleetform").get_secret(key.split(":", 1)[1]) is None]
        if missing:
            raise pulumi.RunError(f"{blueprint}: the models read Kubernetes Secrets whose values are not set; run "
                                  + "; ".join(f"`pulumi config set --secret {key} <value>`" for key in missing)
                                  + ". Nothing was built.")
        if model.cluster.api_access_cidrs is None:
            # the EKS endpoint answers this run's own address (provider.eks.api_access_cidrs absent);
            # fleetform:deployer-cidr overrides the lookup where the egress address is known
            deployer = pulumi.Config("fleetform").get("deployer-cidr")
            if deployer is not None:
                try:
                    network = ipaddress.ip_network(deployer.strip(), strict=False)
                except ValueError:
                    raise pulumi.RunError(f"{blueprint}: fleetform:deployer-cidr is {deployer!r}, not an address or "
                                          "a CIDR range. Nothing was built.") from None
                if network.version != 4:
                    # EKS VpcConfigRequest.publicAccessCidrs: "You can't add IPv6 CIDR blocks to IPv4 clusters"
                    raise pulumi.RunError(f"{blueprint}: fleetform:deployer-cidr is {deployer!r}, an IPv6 range; the "
                                          "cluster's API endpoint admits IPv4 ranges only: give the IPv4 address "
                                          "`pulumi up` runs from. Nothing was built.")
                if covers_internet([deployer.strip()]):
                    raise pulumi.RunError(f"{blueprint}: {deployer_open_message(deployer.strip())}. Nothing was built.")
            if deployer is None:
                try:
                    deployer = deployer_cidr()
                except (OSError, ValueError) as err:
                    raise pulumi.RunError(f"{blueprint}: the public address this run comes from could not be found "
                                          f"({err}); list the networks that reach the cluster's API in "
                                          "provider.eks.api_access_cidrs. Nothing was built.") from None
                pulumi.log.warn(f"the EKS API endpoint answers {deployer} (this run's address) and the VPC only; a "
                                "run from another address moves it there: list the networks in "
                                "provider.eks.api_access_cidrs to deploy from several places")
    build(model, render(model), deployer)
