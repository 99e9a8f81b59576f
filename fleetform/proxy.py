"""How many replicas a fleet's gateway proxy runs: enough that the proxy never caps what the models' replicas can take.

Every request crosses the gateway's loopback Backend (`<fleet>-gateway-pools`, fleetform/gateway.py ModelFallback) on
its way from the first pass to the second, one HTTP/1.1 connection per request in flight. kgateway v2.1 puts no
circuit breakers on a Backend's cluster (plugins/backend/static.go), so that cluster keeps Envoy's defaults
(LOOPBACK_MAX_REQUESTS), and v2.1's BackendConfigPolicy has no `circuitBreakers` (it came in v2.2.0, kgateway #12957).
Past that many requests in flight and as many waiting, one proxy answers 503 (response flag UO): the ceiling is per
proxy replica, so the fleet gets replicas enough for every sequence its models' replicas run at once at their maximum
count (GatewayParameters `kube.deployment.replicas`). tests/test_bbr_envoy.py reads the ceiling from a real Envoy.
"""

from __future__ import annotations

import math

from .models import flag_value
from .records import frozen

LOOPBACK_MAX_REQUESTS = 1024
"""Envoy's default CircuitBreakers.Thresholds (max_connections, max_pending_requests, max_requests: 1,024 each,
envoy/config/cluster/v3/circuit_breaker.proto), which the loopback Backend's cluster keeps."""

MIN_REPLICAS = 2
"""At least two proxies: the proxy is the fleet's only way in, so one replica is an outage on every node drain, and
kgateway v2.1 renders no PodDisruptionBudget for it (fleetform renders one: templates/gateway/proxy-pdb.yaml.j2)."""

SPREAD = ("topology.kubernetes.io/zone", "kubernetes.io/hostname")
"""The proxies spread over zones, then nodes (whenUnsatisfiable: ScheduleAnyway: one node still schedules them all),
so one zone's or node's loss leaves a way in."""

VLLM_MAX_NUM_SEQS_LARGE = 1024
VLLM_MAX_NUM_SEQS = 256
VLLM_LARGE_DEVICE_BYTES = 70 * 2**30
"""vLLM 0.11's default --max-num-seqs for `vllm serve` (UsageContext.OPENAI_API_SERVER): 1,024 on a device of at least
70 GiB whose name is not an A100's, else 256, and never more than --max-num-batched-tokens
(vllm/engine/arg_utils.py EngineArgs._set_default_args, v0.11.0 wheel). vLLM reads the device's memory and name
through NVML from the physical GPU's handle (vllm/platforms/cuda.py NvmlCudaPlatform.get_device_total_memory:
nvmlDeviceGetHandleByIndex, nvmlDeviceGetMemoryInfo), never a MIG device handle: on a MIG slice it gets the whole GPU's
memory where NVML grants the aggregate (NVML: "In MIG mode, if device handle is provided, the API returns aggregate
information, only if the caller has appropriate privileges"), else an error that leaves it 256. The bound is the
whole GPU's, under MIG, time-slicing and MPS alike."""


@frozen
class ModelSlots:
    """One model's share of the requests in flight at once: its maximum replicas x the sequences one runs."""

    model: str
    replicas: int
    seqs: int
    why: str  # where `seqs` comes from

    @property
    def total(self) -> int:
        return self.replicas * self.seqs


@frozen
class ProxySizing:
    models: tuple[ModelSlots, ...]
    needed: int  # the replicas the slots need (at least MIN_REPLICAS)
    asked: int | None  # gateway.proxy_replicas

    @property
    def slots(self) -> int:
        return sum(m.total for m in self.models)

    @property
    def replicas(self) -> int:
        return self.asked if self.asked is not None else self.needed

    @property
    def formula(self) -> str:
        parts = " + ".join(f"{m.model} {m.replicas} replicas x {m.seqs:,} ({m.why})" for m in self.models)
        text = (f"{parts} = {self.slots:,} sequences at once / {LOOPBACK_MAX_REQUESTS:,} requests in flight per proxy "
                f"(the loopback Backend keeps Envoy's default circuit breakers), at least {MIN_REPLICAS}")
        if self.asked is not None:
            text += f"; gateway.proxy_replicas asks {self.asked}"
        return text

    @property
    def result(self) -> str:
        return f"{self.replicas} proxy replica{'s' if self.replicas != 1 else ''}"


def max_num_seqs(fleet, model) -> tuple[int, str]:
    """The sequences one replica of `model` runs at once, and why: --max-num-seqs in extra_args, else vLLM's default
    for the device the replica's vLLM sees."""
    args = tuple(a.replace("_", "-") if a.startswith("--") else a for a in model.extra_args)
    given = _int(flag_value(args, "--max-num-seqs"))
    if given is not None:
        return given, "its --max-num-seqs"
    shape, sharing = fleet.shape, fleet.gpu_sharing
    if shape is None:
        return VLLM_MAX_NUM_SEQS_LARGE, "vLLM 0.11's largest default --max-num-seqs: the GPU is unknown"
    gpu = shape.gpu
    device_bytes, device = gpu.memory_mib * 2**20, f"one {gpu.name}"
    if sharing.strategy == "mig":  # vLLM sees the whole GPU's memory through NVML, not the slice's (above)
        device = f"one {sharing.profile} slice, which reads the whole {gpu.name}'s memory"
    large = device_bytes >= VLLM_LARGE_DEVICE_BYTES and "a100" not in gpu.name.lower()
    seqs = VLLM_MAX_NUM_SEQS_LARGE if large else VLLM_MAX_NUM_SEQS
    why = f"vLLM 0.11's default --max-num-seqs on {device}"
    batched = _int(flag_value(args, "--max-num-batched-tokens"))
    if batched is not None and batched < seqs:
        return batched, why + ", held to --max-num-batched-tokens"
    return seqs, why


def size(fleet) -> ProxySizing:
    """The proxy replicas of an inference fleet's gateway."""
    models = []
    for model in fleet.models:
        seqs, why = max_num_seqs(fleet, model)
        models.append(ModelSlots(model.name, model.replicas.max, seqs, why))
    slots = sum(m.total for m in models)
    needed = max(MIN_REPLICAS, math.ceil(slots / LOOPBACK_MAX_REQUESTS))
    asked = fleet.gateway.proxy_replicas if fleet.gateway is not None else None
    return ProxySizing(tuple(models), needed, asked)


def _int(text: str | None) -> int | None:
    try:
        value = int(text) if text is not None else None
    except ValueError:
        return None
    return value if value is not None and value > 0 else None
