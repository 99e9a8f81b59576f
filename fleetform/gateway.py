"""Derived configuration of how an inference model starts from nothing: the cold-start estimate the
cold-start-budget rule holds to the blueprint's autoscale.cold_start_latency_s. The gateway of issue 23
(Gateway API Inference Extension) builds on it: a model may scale to zero only where a request that
finds no replica can still wake one."""

from __future__ import annotations

from .k8s import LOAD_GB_PER_S, READY_OVERHEAD_S
from .records import frozen


@frozen
class ColdStart:
    """The estimated seconds from a scale-up from zero to a ready replica, in parts."""

    source: str  # hub | s3 | volume
    weights_gb: float  # the checkpoint a replica reads
    read_s: float  # weights_gb over the source's rate
    engine_s: float  # load onto the GPUs, CUDA graph capture and torch.compile
    rate: float  # GB/s of the source

    @property
    def total_s(self) -> float:
        return self.read_s + self.engine_s

    @property
    def detail(self) -> str:
        return (f"{self.weights_gb:g} GB from {self.source} at {self.rate:g} GB/s = {self.read_s:.0f} s, "
                f"plus {self.engine_s:.0f} s to load, compile and capture CUDA graphs")


def cold_start(model) -> ColdStart:
    """The time a replica takes to become ready when none runs: the same figures (k8s.LOAD_GB_PER_S,
    k8s.READY_OVERHEAD_S) that size the default scale-up period, so the two never disagree."""
    source = model.weights.source if model.weights is not None else "hub"
    weights = model.checkpoint_gb
    return ColdStart(source, round(weights, 3), weights / LOAD_GB_PER_S[source], float(READY_OVERHEAD_S),
                     LOAD_GB_PER_S[source])
