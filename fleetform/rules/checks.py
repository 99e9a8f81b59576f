"""Imports every rule module so their rules register, in the order `fleetform rules` lists them."""

from . import blueprint, fleets, inference, kubernetes, nccl, slurm, storage, training  # noqa: F401
from . import images, regions  # noqa: F401
from . import health  # noqa: F401  (after slurm: the Slurm training fleets' health checks)
from . import kueue  # noqa: F401  (training fleets scheduled by Kubernetes)
from . import ray  # noqa: F401  (training fleets scheduled by Ray through KubeRay)
from . import slinky  # noqa: F401  (training fleets scheduled by Slurm on EKS through Slinky)
from . import login  # noqa: F401  (login nodes, users, home of the Slurm training fleets)
from . import acceptance  # noqa: F401  (after health: the acceptance job's DCGM level follows the health suite)
from . import accounting  # noqa: F401  (after slurm: Slurm accounting and teams)
from . import models  # noqa: F401  (the model catalog's rules: after inference's memory rules)
from . import lws  # noqa: F401  (multi-node replicas: after inference's tensor-parallel and memory rules)
from . import gateway  # noqa: F401  (scaling beyond the queue and the cold-start budget: after inference)
from . import caches  # noqa: F401  (the shared compile and download cache: after gateway)
from . import semrouter  # noqa: F401  (routing simple requests to a smaller model: after gateway)
from . import lora  # noqa: F401  (a model's LoRA adapters: after the catalog's memory rules)
from . import kvevents  # noqa: F401  (precise prefix routing: after gateway, lora and lws)
from . import slo  # noqa: F401  (sizing from an SLO: after inference's memory rules)
from . import cluster  # noqa: F401  (the cluster stage: after every fleet is checked on its own)
from . import eks  # noqa: F401  (the cluster's Kubernetes version against EKS's calendar)
from . import pool  # noqa: F401  (pools shared by time: after every fleet is checked on its own)
from . import mig  # noqa: F401  (a node split by GPU between MIG slices and whole GPUs: after inference)
