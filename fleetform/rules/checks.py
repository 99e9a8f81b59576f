"""Imports every rule module so their rules register, in the order `fleetform rules` lists them."""

from . import blueprint, fleets, inference, kubernetes, nccl, slurm, storage, training  # noqa: F401
from . import images, regions  # noqa: F401
from . import health  # noqa: F401  (after slurm: the Slurm training fleets' health checks)
from . import accounting  # noqa: F401  (after slurm: Slurm accounting and teams)
from . import models  # noqa: F401  (the model catalog's rules: after inference's memory rules)
from . import cluster  # noqa: F401  (the cluster stage: after every fleet is checked on its own)
from . import eks  # noqa: F401  (the cluster's Kubernetes version against EKS's calendar)
