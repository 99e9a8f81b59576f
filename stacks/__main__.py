"""The Pulumi program users run `pulumi up` in: fleetform's own, shipped in the package
(fleetform/pulumi_program.py), as in every blueprint repository `fleetform init` writes."""

from pathlib import Path

from fleetform.pulumi_program import main

main(Path(__file__).parent)  # a relative fleetform:blueprint is read from this folder
