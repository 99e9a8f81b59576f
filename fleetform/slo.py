"""Sizing from an SLO: an offline roofline of vLLM serving (issue 23).

Given a model (parameters, precision, attention layout from the model catalog), a workload (input and
output tokens per request, peak QPS) and latency targets (time to first token, inter-token latency),
estimate for each candidate GPU and tensor-parallel size what one replica serves, and pick the cheapest
shape (instance type x TP x replicas) by the catalog's on-demand price. A measured `qps_per_gpu` in the
blueprint overrides the estimate; the estimate is still shown beside it.

The roofline, per replica of `tp` GPUs (every figure from the catalog: providers/aws/gpus.json):

- prefill is compute-bound: 2 x active parameters x input tokens FLOPs at `prefill_mfu` of the GPUs'
  dense tensor throughput in the served precision, plus the tensor-parallel all-reduces of the
  activations (2 per layer) over the GPUs' link;
- one decode step of a batch of B sequences is memory-bandwidth-bound: the weights and the B sequences'
  KV cache are read once, at `decode_bandwidth` of the HBM bandwidth (or compute-bound, 2 x active
  parameters x B FLOPs, whichever is slower), plus a fixed `step_overhead_s` (scheduling, sampling,
  launches: what a step costs on top of its kernels) and 2 all-reduces per layer of B x hidden values;
- the batch is the largest (up to MAX_BATCH) whose step time meets the inter-token target and whose
  KV cache fits beside the weights;
- a replica spends T_prefill + (output - 1) x T_step / B of GPU time per request, so it serves at most
  1 / that many requests per second; the time to first token at a load of rho of that is
  T_step + T_prefill / (1 - rho) (a request waits for the running step, then for the prefill work queued
  ahead of it: an M/M/1 inflation of the prefill), so rho may reach 1 - T_prefill / (TTFT - T_step);
- replicas for the peak: peak QPS / (rho x per-replica QPS), then redundancy and burst headroom as the
  measured path does (sizing.slo_gpus).

The efficiency factors are calibrated against published vLLM figures (benchmarks/slo-published.json,
tests/test_slo.py reproduces each within CALIBRATION_TOLERANCE). They are planning figures: a
`vllm bench serve` run on the chosen shape is what proves a shape.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .records import frozen

MAX_BATCH = 256
"""The largest batch the estimate sizes a replica for. A planning bound, not a vLLM default: set vLLM's
--max-num-seqs at least to the batch the plan shows."""

CALIBRATION_TOLERANCE = 0.20
"""How far (as a fraction of the published figure) the estimate may be from each published vLLM point
in benchmarks/slo-published.json; tests/test_slo.py holds it to this."""


@frozen
class Factors:
    """The roofline's efficiency factors (calibrated: benchmarks/slo-published.json)."""

    prefill_mfu: float = 0.7  # share of dense tensor FLOPS a prefill reaches
    decode_bandwidth: float = 0.85  # share of HBM bandwidth a decode step's reads reach
    step_overhead_s: float = 0.002  # per decode step besides its kernels (scheduler, sampler, launches)
    allreduce_latency_s: float = 30e-6  # one small all-reduce between the GPUs of a node (launch + sync)


FACTORS = Factors()

FP8_TENSOR_CORES = frozenset({"H100", "H200", "B200", "L40S", "L4"})
"""GPU families whose tensor cores run FP8 at twice their dense BF16 rate (the datasheets gpus.json cites
quote FP8 at twice BF16 for Hopper, Ada and Blackwell). A100 and A10G have none: vLLM runs FP8 weights
there as weight-only (Marlin kernels), so the arithmetic stays BF16."""

LINK_GBYTES_PCIE = 31.5
"""GB/s between GPUs with no NVLink (PCIe 4.0 x16), as sizing.NVLINK_GBYTES says for PCIe cards."""


@frozen
class Arch:
    """What the roofline needs of a model."""

    params_b: float  # all parameters: the weights a decode step reads (a MoE reads nearly all experts at batch 8+)
    active_params_b: float  # parameters one token passes through: the FLOPs
    weights_gb: float  # weights in GPU memory, decimal GB (Model.weights_gb)
    layers: int
    hidden: int  # attention heads x head dim: the width of the activations TP all-reduces
    kv_heads: int
    head_dim: int
    kv_dtype_bytes: float
    compute_bits: int  # 8 for FP8 (on GPUs with FP8 tensor cores), else 16

    def kv_bytes_per_token(self, tp: int) -> float:
        """KV cache of one token on the replica (vLLM replicates KV heads where TP exceeds them:
        models.ModelSpec.kv_heads_stored)."""
        return 2 * self.layers * max(1, self.kv_heads // tp) * tp * self.head_dim * self.kv_dtype_bytes


def arch_of(spec, params_b: float, precision: str, weights_gb: float, kv_dtype_bytes: float) -> Arch:
    """The roofline's view of a model of the model catalog (models.ModelSpec) served at `precision`."""
    active = spec.active_params_billion or params_b
    return Arch(params_b, active, weights_gb, spec.layers, spec.attention_heads * spec.head_dim, spec.kv_heads,
                spec.head_dim, kv_dtype_bytes, 8 if precision == "fp8" else 16)


@frozen
class Hardware:
    """One GPU's figures (gpus.json) and its link to the replica's other GPUs."""

    name: str
    family: str
    memory_gb: float
    bf16_tflops: float
    hbm_gbps: float
    link_gbytes: float  # GB/s per GPU and direction to the other GPUs of the node

    @classmethod
    def of(cls, gpu) -> "Hardware":
        """From the catalog's GPU (catalog.Gpu); the link from sizing.NVLINK_GBYTES (PCIe where not listed)."""
        from .sizing import NVLINK_GBYTES

        link = NVLINK_GBYTES.get(gpu.family, (LINK_GBYTES_PCIE, ""))[0]
        return cls(gpu.name, gpu.family, gpu.memory_gb, gpu.bf16_dense_tflops, gpu.hbm_gbps, link)

    def tflops(self, bits: int) -> float:
        return self.bf16_tflops * (2 if bits == 8 and self.family in FP8_TENSOR_CORES else 1)


@frozen
class Workload:
    input_tokens: int
    output_tokens: int
    ttft_s: float
    itl_s: float
    peak_qps: float


def allreduce_s(tp: int, message_bytes: float, link_gbytes: float, f: Factors) -> float:
    """One all-reduce of a message among the replica's TP GPUs: a ring's 2(tp-1)/tp x M over the link,
    plus a fixed latency. Zero with one GPU."""
    if tp <= 1:
        return 0.0
    return f.allreduce_latency_s + 2 * (tp - 1) / tp * message_bytes / (link_gbytes * 1e9)


def prefill_s(arch: Arch, hw: Hardware, tp: int, tokens: int, f: Factors = FACTORS) -> float:
    """Seconds to prefill one request of `tokens` input tokens on a replica of `tp` GPUs."""
    compute = 2 * arch.active_params_b * 1e9 * tokens / (tp * hw.tflops(arch.compute_bits) * 1e12 * f.prefill_mfu)
    reads = arch.weights_gb * 1e9 / (tp * hw.hbm_gbps * 1e9 * f.decode_bandwidth)
    comm = 2 * arch.layers * allreduce_s(tp, tokens * arch.hidden * 2, hw.link_gbytes, f)
    return max(compute, reads) + comm


def decode_step_s(arch: Arch, hw: Hardware, tp: int, batch: int, context: float, f: Factors = FACTORS) -> float:
    """Seconds of one decode step of `batch` sequences of `context` tokens each (on average)."""
    read = arch.weights_gb * 1e9 + batch * context * arch.kv_bytes_per_token(tp)
    memory = read / (tp * hw.hbm_gbps * 1e9 * f.decode_bandwidth)
    compute = 2 * arch.active_params_b * 1e9 * batch / (tp * hw.tflops(arch.compute_bits) * 1e12 * f.prefill_mfu)
    comm = 2 * arch.layers * allreduce_s(tp, batch * arch.hidden * 2, hw.link_gbytes, f)
    return max(memory, compute) + f.step_overhead_s + comm


def kv_batch_limit(arch: Arch, hw: Hardware, tp: int, sequence_tokens: int, utilization: float,
                   overhead_gb: float) -> int:
    """How many sequences of `sequence_tokens` the KV cache holds beside the weights and vLLM's overhead."""
    room = tp * hw.memory_gb * utilization - arch.weights_gb - tp * overhead_gb
    per_sequence = arch.kv_bytes_per_token(tp) * sequence_tokens / 1e9
    return max(0, int(room // per_sequence)) if per_sequence > 0 else MAX_BATCH


@dataclass(frozen=True)
class Estimate:
    """One shape's estimate for a workload."""

    hardware: str
    tp: int
    batch: int  # the largest batch meeting the ITL target (0: none does)
    itl_s: float  # the step time at that batch (at batch 1 where none meets the target)
    prefill_s: float
    qps_replica: float  # requests per second one replica serves at 100% busy
    tokens_per_s_gpu: float  # output tokens per second per GPU at that
    load: float  # the share of qps_replica the TTFT target allows (0: it cannot be met)
    ttft_s: float  # the estimated time to first token at the peak on `replicas` (at an idle replica where unmet)
    replicas: int  # for the peak, before redundancy and burst headroom (0: unmet)
    why: str  # "" when the shape meets the SLO, else what it misses

    @property
    def meets(self) -> bool:
        return not self.why

    @property
    def qps_per_gpu(self) -> float:
        """Requests per second per GPU at the load the TTFT target allows: what a measured qps_per_gpu is."""
        return self.qps_replica * self.load / self.tp


def estimate(arch: Arch, hw: Hardware, tp: int, work: Workload, kv_limit: int, f: Factors = FACTORS) -> Estimate:
    """The roofline for one shape: largest batch meeting ITL, per-replica QPS, the load TTFT allows, replicas."""
    context = work.input_tokens + work.output_tokens / 2  # a running sequence's average length
    pf = prefill_s(arch, hw, tp, work.input_tokens, f)
    limit = min(MAX_BATCH, kv_limit)
    lo, hi = 0, limit  # the largest batch in [1, limit] whose step meets the target (monotonic in batch)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if decode_step_s(arch, hw, tp, mid, context, f) <= work.itl_s:
            lo = mid
        else:
            hi = mid - 1
    batch = lo
    if batch == 0:
        step = decode_step_s(arch, hw, tp, 1, context, f)
        why = (f"the KV cache holds no {work.input_tokens + work.output_tokens:,}-token sequence" if limit == 0 else
               f"one sequence's decode step takes {step * 1000:.1f} ms, over the {work.itl_s * 1000:g} ms "
               "inter-token target")
        return Estimate(hw.name, tp, 0, step, pf, 0.0, 0.0, 0.0, step + pf, 0, why)
    step = decode_step_s(arch, hw, tp, batch, context, f)
    per_request = pf + max(work.output_tokens - 1, 0) * step / batch
    qps = 1 / per_request
    tokens_gpu = qps * work.output_tokens / tp
    room = work.ttft_s - step
    if room <= pf:
        return Estimate(hw.name, tp, batch, step, pf, qps, tokens_gpu, 0.0, step + pf, 0,
                        f"the time to first token at no load is {(step + pf) * 1000:.0f} ms, over the "
                        f"{work.ttft_s * 1000:g} ms target")
    load = 1 - pf / room
    replicas = math.ceil(work.peak_qps / (qps * load))
    at_peak = work.peak_qps / (replicas * qps)  # the load of each of those replicas at the peak: <= load
    return Estimate(hw.name, tp, batch, step, pf, qps, tokens_gpu, load, step + pf / (1 - at_peak), replicas, "")


@dataclass(frozen=True)
class Candidate:
    """An instance type and TP for the model, priced for the peak with redundancy and burst headroom."""

    instance_type: str
    gpus_per_node: int
    price_usd_hr: float | None
    estimate: Estimate
    replicas: int  # with redundancy and burst headroom
    nodes: int

    @property
    def usd_hour(self) -> float | None:
        return None if self.price_usd_hr is None or not self.estimate.meets else self.nodes * self.price_usd_hr


def shape(estimate_: Estimate, peak_qps: float, gpus_per_node: int, redundancy: int,
          headroom: float) -> tuple[int, int]:
    """(replicas, nodes) for an estimate that meets the SLO: the measured path's arithmetic (sizing.slo_gpus)
    on the estimated requests per GPU, each replica on one node. (0, 0) where it does not meet it."""
    from .sizing import slo_gpus

    if not estimate_.meets:
        return 0, 0
    _, _, burst = slo_gpus(peak_qps, estimate_.qps_per_gpu, redundancy, headroom)
    replicas = math.ceil(burst / estimate_.tp)
    return replicas, math.ceil(replicas / (gpus_per_node // estimate_.tp))


def rank(candidates: list[Candidate]) -> list[Candidate]:
    """Those that meet the SLO cheapest first (unpriced after priced), then those that miss it."""
    return sorted(candidates, key=lambda c: (not c.estimate.meets, c.usd_hour is None, c.usd_hour or 0.0,
                                             c.nodes * c.gpus_per_node, c.instance_type, c.estimate.tp))


def closest(candidates: list[Candidate], work: Workload) -> Candidate | None:
    """Where none meets the SLO: the one whose inter-token latency (at batch 1) and time to first token (at no
    load) come nearest to the targets, by the larger of the two ratios: what a reader would relax or buy."""
    return min(candidates, key=lambda c: (max(c.estimate.itl_s / work.itl_s, c.estimate.ttft_s / work.ttft_s),
                                          c.instance_type, c.estimate.tp), default=None)


def benchmark_figure(arch: Arch, hw: Hardware, tp: int, kind: str, sequences: int, input_tokens: int,
                     output_tokens: int, f: Factors = FACTORS) -> float:
    """What the roofline predicts for a published vLLM benchmark point (benchmarks/slo-published.json).

    'latency' (`vllm bench latency`): `sequences` prompts sent together; the batch's end-to-end latency in
    ms, its prefill then output - 1 decode steps at that batch.
    'serve' (`vllm bench serve --max-concurrency sequences`, fixed lengths): output tokens per second, a
    replica spending T_prefill + (output - 1) x T_step / C per request (the estimate's own arithmetic)."""
    context = input_tokens + output_tokens / 2
    step = decode_step_s(arch, hw, tp, sequences, context, f)
    if kind == "latency":
        return (prefill_s(arch, hw, tp, sequences * input_tokens, f) + (output_tokens - 1) * step) * 1000
    if kind == "serve":
        per_request = prefill_s(arch, hw, tp, input_tokens, f) + (output_tokens - 1) * step / sequences
        return output_tokens / per_request
    raise ValueError(f"unknown benchmark kind {kind!r}")


def published_points(path=None) -> list[dict]:
    """The published points (benchmarks/slo-published.json, beside the repository's benchmarks)."""
    import json
    from pathlib import Path

    path = path or Path(__file__).resolve().parent.parent / "benchmarks" / "slo-published.json"
    return json.loads(Path(path).read_text(encoding="utf-8"))["points"]


def reproduce(point: dict, f: Factors = FACTORS) -> float:
    """The estimate for one published point, from the model and GPU catalogs."""
    from .catalog import load_catalog
    from .fit import KV_DTYPE_BYTES
    from .model import BYTES_PER_PARAM
    from .models import load_models

    spec = load_models().find(point["model"])
    gpu = load_catalog().gpus[point["gpu"]]
    weights = spec.params_billion * BYTES_PER_PARAM[point["precision"]]
    arch = arch_of(spec, spec.params_billion, point["precision"], weights,
                   KV_DTYPE_BYTES.get(point["precision"], 2.0))
    return benchmark_figure(arch, Hardware.of(gpu), point["tp"], point["kind"],
                            point.get("batch", point.get("concurrency", 1)), point["input_tokens"],
                            point["output_tokens"], f)


ROOFLINE_FIELDS = ("input_tokens", "output_tokens", "itl_s", "ttft_p90_s")
"""The SLO's fields the estimate needs (ttft_p90_s is also a KEDA trigger where the fleet scales with KEDA)."""


def workload_of(slo) -> Workload | None:
    """The estimate's workload from a blueprint's slo (model.Slo); None where a field it needs is missing."""
    if slo is None or any(getattr(slo, name) is None for name in ROOFLINE_FIELDS):
        return None
    return Workload(slo.input_tokens, slo.output_tokens, slo.ttft_p90_s, slo.itl_s, slo.peak_qps)


@dataclass(frozen=True)
class SloSizing:
    """A model's sizing from its SLO: the blueprint's own shape and every candidate of the catalog, ranked."""

    model: str
    workload: Workload
    chosen: Candidate | None  # the blueprint's instance type (or on-prem shape) and tensor_parallel
    candidates: list[Candidate]  # the catalog's instance types x TP that hold the model, ranked
    measured_qps_per_gpu: float | None  # the blueprint's qps_per_gpu, which overrides the estimate

    @property
    def cheapest(self) -> Candidate | None:
        return next((c for c in self.candidates if c.estimate.meets and c.usd_hour is not None), None)

    @property
    def qps_per_gpu(self) -> float | None:
        """What the replicas are sized with: the measured figure, else the blueprint's shape's estimate
        (None where that shape does not meet the SLO)."""
        if self.measured_qps_per_gpu is not None:
            return self.measured_qps_per_gpu
        return self.chosen.estimate.qps_per_gpu if self.chosen is not None and self.chosen.estimate.meets else None


def _candidate(model, arch_fn, hw: Hardware, tp: int, gpus_per_node: int, name: str, price: float | None,
               work: Workload, slo) -> Candidate:
    from .model import GPU_OVERHEAD_GB

    arch = arch_fn()
    limit = kv_batch_limit(arch, hw, tp, work.input_tokens + work.output_tokens, model.gpu_memory_utilization,
                           GPU_OVERHEAD_GB)
    est = estimate(arch, hw, tp, work, limit)
    replicas, nodes = shape(est, work.peak_qps, gpus_per_node, slo.redundancy, slo.burst_headroom)
    return Candidate(name, gpus_per_node, price, est, replicas, nodes)


def for_model(fleet, model, instances=None) -> SloSizing | None:
    """The SLO sizing of one served model of an inference fleet; None where the estimate cannot run: no
    complete SLO workload, a model the model catalog does not list (no attention layout), an unknown
    shape, a tensor_parallel that does not divide the node's GPUs, or shared GPUs (MIG, time-slicing, MPS: the roofline is of whole GPUs)."""
    from .catalog import load_catalog
    from .fit import fits, kv_dtype_bytes

    work = workload_of(model.slo)
    if work is None or model.spec is None or fleet.shape is None or fleet.gpu_sharing.strategy != "none":
        return None
    if fleet.shape.gpu_count % model.tensor_parallel or model.pipeline_parallel > 1:
        return None  # a replica that no node holds whole, or pipeline stages: slo-inputs says why
    kv = kv_dtype_bytes(model)

    def arch_fn():
        return arch_of(model.spec, model.model_params_billion, model.precision, model.weights_gb, kv)

    tokens = model.context_tokens or work.input_tokens + work.output_tokens  # what vLLM must hold to start
    chosen = _candidate(model, arch_fn, Hardware.of(fleet.shape.gpu), model.tensor_parallel, fleet.shape.gpu_count,
                        fleet.instance_type or fleet.shape.gpu.name,
                        fleet.instance.price_usd_hr if fleet.instance is not None else None, work, model.slo)
    candidates = []
    if fleet.instance is not None:  # the catalog's prices are AWS's: on-prem fleets get their own shape only
        for instance in (instances if instances is not None else load_catalog().instances.values()):
            if instance.price_usd_hr is None:
                continue
            for tp in (d for d in range(1, instance.gpu_count + 1) if instance.gpu_count % d == 0):
                if fits(model, instance.gpu.memory_gb, tp, tokens):
                    candidates.append(_candidate(model, arch_fn, Hardware.of(instance.gpu), tp, instance.gpu_count,
                                                 instance.name, instance.price_usd_hr, work, model.slo))
    return SloSizing(model.name, work, chosen, rank(candidates), model.slo.qps_per_gpu)


def as_dict(s: SloSizing, top: int = 5) -> dict:
    """The plan's JSON of a model's SLO sizing: the assumptions, the blueprint's shape, the candidates ranked."""
    from .sizing import PRICES

    def one(c: Candidate) -> dict:
        e = c.estimate
        return {"instance_type": c.instance_type, "gpu": e.hardware, "tensor_parallel": e.tp,
                "meets_slo": e.meets, "misses": e.why or None, "batch": e.batch,
                "itl_ms": round(e.itl_s * 1000, 2), "prefill_ms": round(e.prefill_s * 1000, 2),
                "ttft_ms": round(e.ttft_s * 1000, 1), "load": round(e.load, 3),
                "qps_per_replica": round(e.qps_replica, 3), "qps_per_gpu": round(e.qps_per_gpu, 3),
                "output_tokens_per_s_per_gpu": round(e.tokens_per_s_gpu, 1),
                "replicas": c.replicas, "nodes": c.nodes,
                "usd_per_hour": None if c.usd_hour is None else round(c.usd_hour, 2)}

    w = s.workload
    return {
        "model": s.model,
        "workload": {"input_tokens": w.input_tokens, "output_tokens": w.output_tokens, "ttft_s": w.ttft_s,
                     "itl_s": w.itl_s, "peak_qps": w.peak_qps},
        "factors": {"prefill_mfu": FACTORS.prefill_mfu, "decode_bandwidth": FACTORS.decode_bandwidth,
                    "step_overhead_s": FACTORS.step_overhead_s, "allreduce_latency_s": FACTORS.allreduce_latency_s,
                    "max_batch": MAX_BATCH, "calibration": "benchmarks/slo-published.json: five published vLLM "
                    f"figures on H200 and A100, each within {CALIBRATION_TOLERANCE:.0%}"},
        "measured_qps_per_gpu": s.measured_qps_per_gpu,
        "sized_with": ("measured qps_per_gpu" if s.measured_qps_per_gpu is not None else
                       "the estimate at the blueprint's shape" if s.qps_per_gpu is not None else None),
        "chosen": None if s.chosen is None else one(s.chosen),
        "candidates": [one(c) for c in s.candidates[:top]],
        "candidates_considered": len(s.candidates),
        "prices": PRICES,
    }


def plan_lines(entries: list[dict], markdown: bool, table) -> list[str]:
    """The plan's text and markdown of the fleet's SLO sizings (entries: as_dict's), with `table` the plan's
    table writer."""
    lines: list[str] = []
    for e in entries:
        w, f = e["workload"], e["factors"]
        title = (f"SLO sizing of {e['model']}: {w['input_tokens']:,} in / {w['output_tokens']:,} out tokens, "
                 f"TTFT {w['ttft_s'] * 1000:g} ms, ITL {w['itl_s'] * 1000:g} ms, {w['peak_qps']:g} QPS at peak")
        lines += ["", f"**{title}**", ""] if markdown else ["", f"  {title}"]
        assumptions = (f"roofline: prefill at {f['prefill_mfu']:g} of dense tensor FLOPS, decode at "
                       f"{f['decode_bandwidth']:g} of HBM bandwidth + {f['step_overhead_s'] * 1000:g} ms a step, "
                       f"{f['allreduce_latency_s'] * 1e6:g} us an all-reduce, batch up to {f['max_batch']}; "
                       f"calibrated on {f['calibration']}")
        lines.append(f"- _{assumptions}_" if markdown else f"    {assumptions}")
        sized = (f"sized with the measured qps_per_gpu {e['measured_qps_per_gpu']:g} (it overrides the estimate)"
                 if e["sized_with"] == "measured qps_per_gpu" else
                 "sized with the estimate at the blueprint's shape" if e["sized_with"] else
                 "not sized: the blueprint's shape does not meet the SLO")
        lines.append(f"- _{sized}_" if markdown else f"    {sized}")
        rows = []
        for label, c in ([("blueprint", e["chosen"])] if e["chosen"] else []) + [
                (str(i), c) for i, c in enumerate(e["candidates"], 1)]:
            rows.append((label, c["instance_type"], f"TP {c['tensor_parallel']}", str(c["batch"]),
                         f"{c['itl_ms']:g}", f"{c['ttft_ms']:g}", f"{c['output_tokens_per_s_per_gpu']:,.0f}",
                         f"{c['qps_per_gpu']:g}", str(c["replicas"]), str(c["nodes"]),
                         "-" if c["usd_per_hour"] is None else f"${c['usd_per_hour']:,.2f}",
                         "yes" if c["meets_slo"] else f"no: {c['misses']}"))
        header = ("rank", "instance", "TP", "batch", "ITL ms", "TTFT ms", "out tok/s/GPU", "QPS/GPU", "replicas",
                  "nodes", "$/h", "meets SLO")
        lines += ([""] if markdown else []) + table(header, rows, markdown) + ([""] if markdown else [])
        if e["candidates_considered"] > len(e["candidates"]):
            more = f"{e['candidates_considered'] - len(e['candidates'])} more candidates not shown"
            lines.append(f"- _{more}_" if markdown else f"    {more}")
    return lines
