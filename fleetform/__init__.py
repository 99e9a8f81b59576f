"""fleetform: GPU fleet blueprints -> validated model -> Slurm, NCCL, Kubernetes and Pulumi."""

__version__ = "0.1.0"
