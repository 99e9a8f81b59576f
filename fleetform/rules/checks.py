"""Imports every rule module so their rules register, in the order `fleetform rules` lists them."""

from . import blueprint, fleets, inference, kubernetes, nccl, slurm, storage, training  # noqa: F401
