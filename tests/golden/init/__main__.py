"""The Pulumi program: fleetform's own, shipped in the fleetform package (fleetform/pulumi_program.py)."""

from pathlib import Path

from fleetform.pulumi_program import main

main(Path(__file__).parent)  # a relative fleetform:blueprint is read from this folder
