"""Imports every rule module so their rules register, in the order `fleetform rules` lists them."""

from . import blueprint, fleets, inference, kubernetes, nccl, slurm, storage, training  # noqa: F401
from . import images, regions  # noqa: F401
from . import health  # noqa: F401  (after slurm: the Slurm training fleets' health checks)
from . import cluster  # noqa: F401  (the cluster stage: after every fleet is checked on its own)
