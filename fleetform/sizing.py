"""Sizing and cost: every figure a step with its inputs, so a reviewer can follow the arithmetic.

Units: GB are decimal (10^9 bytes), as model sizes are quoted; GPU memory comes from the catalog
in MiB and is converted. Prices are the catalog's dated on-demand prices; what has no dated price
(spot, Capacity Blocks, the controller, storage) says so instead of guessing.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from .model import BYTES_PER_PARAM, GPU_OVERHEAD_GB, Blueprint, Fleet
from .route_cost import blended_cost, route_cost
from .k8s import efs_cost_note
from .lws import nodes_per_replica
from .workload import (CAPACITY_BLOCK_MAX_DAYS, OPTIMIZER_BYTES, gb_text as _gb,  # noqa: F401 (re-exported)
                       training_state_gb, training_time)

HOURS_PER_MONTH = 730
PRICES = "on-demand prices of us-east-1: AWS Price List API, 2026-07-20"
from .fit import KV_CACHE_SHARE  # noqa: E402 (the same room the kv-cache-room rule asks for)

NVLINK_GBYTES = {
    # GPU-to-GPU bandwidth inside a node, GB/s per GPU and direction (the datasheets quote both
    # directions together); PCIe cards talk through PCIe 4.0 x16 (16 GT/s x 16 lanes, 128b/130b)
    "H100": (450.0, "NVLink 4, 900 GB/s per GPU both ways (NVIDIA H100 datasheet, 2023-09)"),
    "H200": (450.0, "NVLink 4, 900 GB/s per GPU both ways (NVIDIA H200 datasheet, 2024-11)"),
    "A100": (300.0, "NVLink 3, 600 GB/s per GPU both ways (NVIDIA A100 datasheet, 2021-06)"),
    "B200": (900.0, "NVLink 5, 1.8 TB/s per GPU both ways (NVIDIA DGX B200 datasheet, 2024-03)"),
    "L40S": (31.5, "PCIe 4.0 x16, no NVLink (NVIDIA L40S datasheet, 2023-08; PCIe Base Specification 4.0, 2017)"),
    "L4": (31.5, "PCIe 4.0 x16, no NVLink (NVIDIA L4 datasheet, 2023-03; PCIe Base Specification 4.0, 2017)"),
    "A10G": (31.5, "PCIe 4.0 x16, no NVLink (PCIe Base Specification 4.0, 2017)"),
}

HCA_GBITS = 400.0
"""On-prem InfiniBand or RoCE: each HCA listed under interconnect.hcas is taken as a 400 Gbit/s
NDR / 400 GbE port: ConnectX-7, as in a DGX H100 (eight single-port ConnectX-7 VPI for the
compute fabric, up to 400 Gb/s; NVIDIA DGX BasePOD reference architecture, "Core Components",
docs.nvidia.com/dgx-basepod, read 2026-11-22). The blueprint gives no link rate: a planning figure."""

LATENCY_US = {
    "efa": (15.0, "EFA's SRD transport, about 15 us per message (Shalev et al., 'A Cloud-Optimized Transport "
                  "Protocol for Elastic and Scalable HPC', IEEE Micro 2020)"),
    "infiniband": (2.0, "InfiniBand NDR through one switch level, about 2 us (NVIDIA ConnectX-7 and Quantum-2 "
                        "product briefs quote sub-microsecond port-to-port; 2 us allows for the software stack)"),
    "roce": (5.0, "RoCE v2 on a lossless fabric, about 5 us (a planning figure, not a measurement)"),
    "tcp": (50.0, "TCP sockets, about 50 us (a planning figure, not a measurement)"),
}


@dataclass(frozen=True)
class Step:
    what: str
    formula: str
    result: str


@dataclass
class FleetSizing:
    fleet: str
    role: str
    steps: list[Step] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    slo: list[dict] = field(default_factory=list)  # fleetform.slo.as_dict of each model sized from its SLO

    def add(self, what: str, formula: str, result: str) -> None:
        self.steps.append(Step(what, formula, result))





def training_memory(params_b: float, precision: str, optimizer: str | None, gpu_gb: float, gpus_per_node: int,
                    out: FleetSizing) -> tuple[int, int]:
    """Weights, gradients and optimizer states against GPU memory; returns (min nodes, nodes at the high estimate)."""
    fp32 = params_b * 4
    weights = params_b * BYTES_PER_PARAM[precision]
    out.add("weights in FP32", f"{params_b:g}B params x 4 B", _gb(fp32))
    out.add(f"weights in {precision.upper()}", f"{params_b:g}B params x {BYTES_PER_PARAM[precision]:g} B", _gb(weights))
    what, low_b, high_b = OPTIMIZER_BYTES[optimizer or "adamw"]
    low = params_b * low_b * BYTES_PER_PARAM[precision]
    high = params_b * max(high_b, low_b * BYTES_PER_PARAM[precision])
    out.add(f"{what} ({optimizer or 'adamw'})",
            f"{params_b:g}B x {low / params_b:g} B (all in {precision.upper()}) to {params_b:g}B x {high_b} B "
            "(FP32 master weights and states)", f"{_gb(low)} to {_gb(high)}")
    gpus_low, gpus_high = math.ceil(low / gpu_gb), math.ceil(high / gpu_gb)
    nodes_low, nodes_high = math.ceil(gpus_low / gpus_per_node), math.ceil(gpus_high / gpus_per_node)
    out.add("GPUs to hold it (before activations)", f"{_gb(low)} / {gpu_gb:.1f} GB to {_gb(high)} / {gpu_gb:.1f} GB",
            f"{gpus_low} to {gpus_high} GPUs: {_nodes(nodes_high)} of {gpus_per_node} with FP32 master weights "
            "and states" + (f" ({_nodes(nodes_low)} only if everything stays in {precision.upper()})"
                            if nodes_low != nodes_high else ""))
    return nodes_low, nodes_high


def _nodes(count: int) -> str:
    return f"{count:,} node{'s' if count != 1 else ''}"








def smallest_tensor_parallel(weights_gb: float, gpu_gb: float, gpus_per_node: int, utilization: float,
                             overhead_gb: float = 0.0) -> int | None:
    """The smallest TP whose GPUs hold the weights, overhead_gb per GPU and the KV cache's share."""
    for tp in (d for d in range(1, gpus_per_node + 1) if gpus_per_node % d == 0):
        usable = tp * gpu_gb * utilization
        if weights_gb + tp * overhead_gb <= usable * (1 - KV_CACHE_SHARE):
            return tp
    return None


def slo_gpus(peak_qps: float, qps_per_gpu: float, redundancy: int, headroom: float) -> tuple[int, int, int]:
    """(GPUs for the peak, with N+redundancy, with burst headroom), each rounded up."""
    base = math.ceil(peak_qps / qps_per_gpu)
    spare = base + redundancy
    return base, spare, math.ceil(spare * (1 + headroom))


def ring_allreduce_s(n: int, message_gb: float, bandwidth_gbps: float, latency_us: float) -> float:
    """One flat ring over n GPUs: T = 2(n-1)/n x M/B + 2(n-1) x alpha (a reduce-scatter, then an
    all-gather, of n-1 steps each; bandwidth B in Gbit/s). The bandwidth-optimal ring of Patarasuk
    and Yuan (J. Parallel Distrib. Comput. 69(2), 2009); NCCL's bus bandwidth is M/T x 2(n-1)/n
    for the same reason (nccl-tests doc/PERFORMANCE.md)."""
    return 2 * (n - 1) / n * message_gb * 8 / bandwidth_gbps + 2 * (n - 1) * latency_us * 1e-6


def hierarchical_allreduce_s(nodes: int, gpus_per_node: int, message_gb: float, nvlink_gbytes: float,
                             node_net_gbps: float, latency_us: float) -> float:
    """All-reduce of M bytes on nodes x gpus_per_node GPUs with NVLink inside a node and all the
    node's NICs between nodes: inside each node a reduce-scatter and an all-gather over NVLink
    (2(G-1)/G x M at B_nvlink per GPU); between nodes each GPU's shard is all-reduced over its own
    NICs, so the node moves 2(N-1)/N x M at the node's whole network bandwidth. NCCL pipelines the
    two levels (chunks flow through NVLink while others cross the network), so the slower level
    sets the time; each of the 2(N-1) network steps pays the fabric's latency."""
    g, n = gpus_per_node, nodes
    inside = 2 * (g - 1) / g * message_gb / nvlink_gbytes if g > 1 else 0.0
    between = 2 * (n - 1) / n * message_gb * 8 / node_net_gbps if n > 1 else 0.0
    return max(inside, between) + 2 * (n - 1) * latency_us * 1e-6


def node_network(fleet: Fleet) -> tuple[float, str] | None:
    """(Gbit/s a node has for NCCL between nodes, where the figure comes from), or None."""
    fabric = fleet.interconnect.fabric if fleet.interconnect else "tcp"
    if fleet.instance is not None:
        instance = fleet.instance
        if not instance.net_baseline_gbps:
            return None
        if fabric == "tcp" and instance.network_cards > 1:
            # a TCP fleet's nodes (a Slurm fleet's launch template, a Ray fleet's EKS node group) have one network
            # interface, on card 0; EC2 gives each network card its own bandwidth (NetworkCardInfo
            # baselineBandwidthInGbps), so NCCL's sockets get one card's share
            per_card = instance.net_baseline_gbps / instance.network_cards
            return per_card, (f"{per_card:g} Gbit/s: one of the {instance.network_cards} network cards of "
                              f"{instance.name} ({instance.net_baseline_gbps:g} Gbit/s per instance, catalog: EC2 "
                              "DescribeInstanceTypes), as a TCP fleet's nodes have one network interface, on card 0 "
                              "(EC2 NetworkCardInfo: bandwidth is per network card)")
        return instance.net_baseline_gbps, (f"{instance.net_baseline_gbps:g} Gbit/s per instance "
                                            f"({instance.name}, catalog: EC2 DescribeInstanceTypes), "
                                            "all of its network cards in use by NCCL's channels")
    if fabric in ("infiniband", "roce") and fleet.shape is not None:
        hcas = len(fleet.interconnect.hcas) or fleet.shape.gpu_count
        listed = "interconnect.hcas" if fleet.interconnect.hcas else "one per GPU (no interconnect.hcas listed)"
        return hcas * HCA_GBITS, (f"{hcas} HCAs ({listed}) x {HCA_GBITS:g} Gbit/s (ConnectX-7 NDR / 400 GbE, "
                                  "as in a DGX H100 per NVIDIA's DGX BasePOD reference architecture; the blueprint "
                                  "gives no link rate)")
    return None


def _training(bp: Blueprint, fleet: Fleet, out: FleetSizing) -> None:
    shape, work = fleet.shape, fleet.workload
    gpu_gb = shape.gpu.memory_gb
    gpus = fleet.nodes.max * shape.gpu_count
    if work is not None:
        _, high = training_memory(work.model_params_billion, work.precision, work.optimizer, gpu_gb, shape.gpu_count,
                                  out)
        out.notes.append(f"the fleet's {_nodes(fleet.nodes.max)} ({gpus:,} GPUs) "
                         + ("hold the training state with FP32 master weights and states" if fleet.nodes.max >= high
                            else f"cannot hold the training state with FP32 master weights and states: it needs "
                                 f"at least {_nodes(high)} [training-memory]"))
        if work.tokens_billion and work.mfu:
            peak = shape.gpu.bf16_dense_tflops
            gpu_hours, hours = training_time(work.model_params_billion, work.tokens_billion, gpus, peak, work.mfu)
            out.add("training compute", f"6 x {work.model_params_billion:g}e9 params x {work.tokens_billion:g}e9 tokens",
                    f"{6 * work.model_params_billion * work.tokens_billion * 1e18:.3g} FLOPs")
            out.add("GPU-hours", f"FLOPs / ({peak:g} TFLOPS BF16 dense x MFU {work.mfu:g}) / 3600",
                    f"{gpu_hours:,.0f} GPU-hours")
            out.add("wall-clock time", f"{gpu_hours:,.0f} GPU-hours / {gpus} GPUs",
                    f"{hours:,.0f} hours ({hours / 24:,.1f} days)")
            price = fleet.instance.price_usd_hr if fleet.instance else None
            if price is not None and fleet.capacity_type in ("on-demand", "reservation"):
                out.add("training cost", f"{gpu_hours:,.0f} GPU-hours x ${price:g} / {shape.gpu_count} GPUs per instance",
                        f"${gpu_hours * price / shape.gpu_count:,.0f}")
            else:
                out.notes.append(f"training cost not priced: {_unpriced(fleet)}")
        if fleet.nodes.max > 1 and fleet.interconnect is not None:
            _allreduce(fleet, work, out)
    out.notes.append("utilization: training should keep its GPUs 95%+ busy; idle reserved GPUs are the largest waste")


def _allreduce(fleet: Fleet, work, out: FleetSizing) -> None:
    shape, nodes = fleet.shape, fleet.nodes.max
    network = node_network(fleet)
    nvlink = NVLINK_GBYTES.get(shape.gpu.family)
    if network is None or nvlink is None:
        out.notes.append("all-reduce not estimated: the node's network bandwidth is not known for "
                         f"{fleet.interconnect.fabric}")
        return
    node_gbps, network_source = network
    (nvlink_gbytes, nvlink_source), g = nvlink, shape.gpu_count
    gpus = nodes * g
    message = work.model_params_billion * BYTES_PER_PARAM[work.precision]
    latency, latency_source = LATENCY_US[fleet.interconnect.fabric]
    seconds = hierarchical_allreduce_s(nodes, g, message, nvlink_gbytes, node_gbps, latency)
    out.add("all-reduce of the gradients (NVLink in a node, every NIC between nodes)",
            f"max(2({g}-1)/{g} x {_gb(message)} / {nvlink_gbytes:g} GB/s, 2({nodes}-1)/{nodes} x {_gb(message)} / "
            f"{node_gbps / 8:g} GB/s) + 2({nodes}-1) x {latency:g} us", f"{seconds:.2f} s per step")
    ring = ring_allreduce_s(gpus, message, min(node_gbps, nvlink_gbytes * 8), latency)
    out.add("all-reduce as one flat ring over every GPU (the slower bound)",
            f"2({gpus}-1)/{gpus} x {_gb(message)} / {min(node_gbps / 8, nvlink_gbytes):g} GB/s + 2({gpus}-1) x "
            f"{latency:g} us", f"{ring:.2f} s per step")
    out.notes.append(f"all-reduce bandwidth: {network_source}; inside a node {nvlink_source}; latency: "
                     f"{latency_source}")
    out.notes.append("all-reduce model: a ring's 2(N-1)/N x M per level, NVLink and network pipelined (the slower "
                     "level sets the time); it reproduces nccl-tests all_reduce_perf on 2 x p5.48xlarge over EFA "
                     "(AWS awsome-distributed-training) and on 8 x H100 over NVLink (NVIDIA nccl-tests #212) within 10%")
    out.add("bisection bandwidth", f"{nodes} nodes / 2 x {node_gbps:g} Gbit/s", f"{nodes / 2 * node_gbps:,.0f} Gbit/s")


def _inference(bp: Blueprint, fleet: Fleet, out: FleetSizing) -> None:
    shape = fleet.shape
    devices = fleet.devices()
    if devices is None:
        return
    per_node, device_gb, device = devices
    shared = fleet.gpu_sharing.strategy != "none"
    routes = {}  # model name -> RouteCost, for the blend of semantic routing
    for model in fleet.models:
        tokens = model.context_tokens
        if model.spec is not None and tokens is not None:
            _known_model(model, tokens, device_gb, device, 1 if shared else shape.gpu_count, out)
        else:
            tp = smallest_tensor_parallel(model.weights_gb, device_gb, 1 if shared else shape.gpu_count,
                                          model.gpu_memory_utilization, GPU_OVERHEAD_GB)
            out.add(f"{model.name}: smallest tensor parallel",
                    f"{_gb(model.weights_gb)} of weights + TP x {GPU_OVERHEAD_GB:g} GB overhead <= TP x {device_gb:.1f} GB "
                    f"x {model.gpu_memory_utilization:g} x {1 - KV_CACHE_SHARE:g} (room for the KV cache)",
                    f"TP {tp} on {device}" if tp else f"does not fit one {device}")
        if model.lora is not None and model.spec is not None and model.spec.lora is not None:
            from .lora import slots_gb

            out.add(f"{model.name}: LoRA adapter slots",
                    f"{model.lora.max_loras} slots x rank {model.lora.max_lora_rank} on every LoRA layer of "
                    f"{model.spec.id}, TP {model.tensor_parallel} (fleetform/lora.py, vLLM 0.11 create_lora_weights)",
                    f"{slots_gb(model):.2f} GB of GPU memory")
        if fleet.gateway is not None:
            from .kvevents import routing_step

            out.add(f"{model.name}: routing", *routing_step(fleet))
        if model.gpus > per_node and not shared:
            out.add(f"{model.name}: nodes per replica",
                    f"TP {model.tensor_parallel} x PP {model.pipeline_parallel} = {model.gpus} GPUs / {per_node} per node",
                    f"{nodes_per_replica(model, per_node)} nodes (a LeaderWorkerSet group)")
        if model.slo is None:
            continue
        slo = model.slo
        qps_per_gpu = _slo_estimate(fleet, model, out) if slo.qps_per_gpu is None else slo.qps_per_gpu
        if slo.qps_per_gpu is not None:  # measured: it overrides, and the estimate is shown beside it
            from . import slo as roofline

            sized = roofline.for_model(fleet, model)
            if sized is not None:
                out.slo.append(roofline.as_dict(sized))
        if qps_per_gpu is None:
            continue
        base, spare, burst = slo_gpus(slo.peak_qps, qps_per_gpu, slo.redundancy, slo.burst_headroom)
        out.add(f"{model.name}: GPUs for the peak", f"{slo.peak_qps:g} QPS / {qps_per_gpu:{'g' if slo.qps_per_gpu else '.3g'}} QPS per GPU"
                + (" (estimated)" if slo.qps_per_gpu is None else ""), f"{base} GPUs")
        out.add(f"{model.name}: redundancy", f"{base} + {slo.redundancy} (N+{slo.redundancy})", f"{spare} GPUs")
        out.add(f"{model.name}: burst headroom", f"{spare} x {1 + slo.burst_headroom:g}", f"{burst} GPUs")
        replicas = math.ceil(burst / model.gpus)
        # a replica spanning nodes takes whole nodes (a LeaderWorkerSet group: fleetform/lws.py)
        nodes = (replicas * nodes_per_replica(model, per_node) if model.gpus > per_node
                 else math.ceil(replicas * model.gpus / per_node))
        out.add(f"{model.name}: replicas and nodes",
                f"{burst} GPUs / {model.gpus} a replica (TP {model.tensor_parallel} x PP {model.pipeline_parallel}); "
                f"{replicas} x {model.gpus} / {per_node} per node" if model.pipeline_parallel > 1 else
                f"{burst} GPUs / TP {model.tensor_parallel}; {replicas} x {model.tensor_parallel} / {per_node} per node",
                f"{replicas} replicas on {nodes} node{'s' if nodes != 1 else ''}")
        utilization = slo.peak_qps / (replicas * model.gpus * qps_per_gpu)
        route = route_cost(fleet, model, replicas, qps_per_gpu)
        if route is not None:
            out.add(f"{model.name}: cost per 1,000 requests", route.formula, route.result)
            routes[model.name] = route
        out.notes.append(f"{model.name}: {utilization:.0%} busy at peak; inference should run at 50-70% to keep "
                         "latency under bursts")
    blend = blended_cost(fleet.semantic_routing, routes)
    if blend is not None:
        out.add(f"requests for '{fleet.semantic_routing.model_name}': blended cost per 1,000 requests", blend.formula,
                blend.result)
    if fleet.inference_gateway is not None:  # every request crosses the proxy's loopback Backend (fleetform/proxy.py)
        proxies = fleet.inference_gateway.proxies
        out.add("gateway: proxy replicas", proxies.formula, proxies.result)
    if fleet.kube is not None and fleet.kube.shared_cache is not None:  # `cache:`: which start applies (fleetform/gateway.py)
        from .gateway import cold_start

        for model in fleet.models:
            start = cold_start(model, fleet)
            out.add(f"{model.name}: replica start, first / with the shared cache filled",
                    f"first: {start.detail}; later: {start.later.detail}",
                    f"{start.total_s:.0f} s / {start.later.total_s:.0f} s")
        out.notes.append("a start is a first start while the shared cache holds nothing for the model, its image and "
                         "flags (a new image or flag is a new compile-cache folder); KEDA's scale-up period follows "
                         "the later start, cold-start-budget holds the first")
    if fleet.nodes is not None and fleet.nodes.elastic:
        out.notes.append(f"nodes scale from {fleet.nodes.min} to {fleet.nodes.max} only with a node autoscaler in "
                         "the cluster (Cluster Autoscaler with auto-discovery, or Karpenter): the replicas "
                         "autoscaler adds pods, not nodes")


def _slo_estimate(fleet: Fleet, model, out: FleetSizing) -> float | None:
    """The roofline's requests per second per GPU at the blueprint's shape (fleetform/slo.py), its steps in the
    sizing and its table in out.slo; None where it cannot run or the shape does not meet the SLO."""
    from . import slo as roofline

    sized = roofline.for_model(fleet, model)
    if sized is None:
        out.notes.append(f"{model.name}: not sized from the SLO: it needs qps_per_gpu, or input_tokens, output_tokens, "
                         "itl_s and ttft_p90_s for a model of the model catalog on whole GPUs [slo-inputs]")
        return None
    out.slo.append(roofline.as_dict(sized))
    e, w = sized.chosen.estimate, sized.workload
    out.add(f"{model.name}: prefill of {w.input_tokens:,} tokens (compute-bound)",
            f"2 x {model.spec.active_params_billion or model.model_params_billion:g}B params x "
            f"{w.input_tokens:,} tokens / (TP {e.tp} x {e.hardware} dense tensor FLOPS x "
            f"{roofline.FACTORS.prefill_mfu:g})", f"{e.prefill_s * 1000:.1f} ms")
    out.add(f"{model.name}: largest batch meeting ITL {w.itl_s * 1000:g} ms (decode bandwidth-bound)",
            f"(weights + batch x KV cache) / (TP {e.tp} x HBM x {roofline.FACTORS.decode_bandwidth:g}) + "
            f"{roofline.FACTORS.step_overhead_s * 1000:g} ms + TP all-reduces",
            f"batch {e.batch}, {e.itl_s * 1000:.1f} ms a token" if e.batch else f"none: {e.why}")
    if not e.meets:
        out.notes.append(f"{model.name}: {sized.chosen.instance_type} with TP {e.tp} does not meet the SLO: {e.why} "
                         "[slo-shape]")
        return None
    out.add(f"{model.name}: estimated requests per GPU",
            f"1 / ({e.prefill_s * 1000:.1f} ms + ({w.output_tokens:,} - 1) x {e.itl_s * 1000:.1f} ms / {e.batch}) "
            f"/ TP {e.tp} x load {e.load:.2f} (TTFT {w.ttft_s * 1000:g} ms allows it)",
            f"{e.qps_per_gpu:.3g} QPS per GPU ({e.tokens_per_s_gpu:,.0f} output tokens/s per GPU at full load)")
    return e.qps_per_gpu


def _known_model(model, tokens: int, device_gb: float, device: str, gpus: int, out: FleetSizing) -> None:
    """A model of the model catalog: the KV cache of one sequence from its attention layout, and the smallest
    tensor parallel that holds the weights, the overhead, the KV cache's share and that sequence."""
    from .fit import fits, kv_dtype_bytes
    from .models import GIB

    spec, size = model.spec, kv_dtype_bytes(model)
    tp = next((d for d in range(1, gpus + 1) if gpus % d == 0 and fits(model, device_gb, d, tokens)), None)
    at = tp or model.tensor_parallel
    kv = spec.kv_bytes_per_token(at, size) * tokens
    out.add(f"{model.name}: KV cache of one {tokens:,}-token sequence",
            f"2 x {spec.layers} layers x {spec.kv_heads_stored(at)} KV heads x {spec.head_dim} x {size:g} B x "
            f"{tokens:,} tokens ({spec.id}, fleetform catalog --models)", f"{kv / GIB:.2f} GiB")
    out.add(f"{model.name}: smallest tensor parallel",
            f"{_gb(model.weights_gb)} of weights + TP x {GPU_OVERHEAD_GB:g} GB overhead <= TP x {device_gb:.1f} GB x "
            f"{model.gpu_memory_utilization:g} x {1 - KV_CACHE_SHARE:g}, and + {kv / 1e9:.1f} GB of KV cache "
            f"<= TP x {device_gb:.1f} GB x {model.gpu_memory_utilization:g}",
            f"TP {tp} on {device}" if tp else f"does not fit one {device}")


def _unpriced(fleet: Fleet) -> str:
    if fleet.instance is None:
        return "on-prem hardware has no hourly price here"
    if fleet.capacity_type == "spot":
        return "spot prices change by the hour; fleetform's catalog has no dated spot price"
    if fleet.capacity_type == "capacity-block":
        return "Capacity Block prices are set per reservation when it is bought"
    if fleet.instance.price_usd_hr is None:
        return f"AWS publishes no on-demand price for {fleet.instance.name} in the catalog"
    return "not priced"


def sizing(bp: Blueprint) -> list[FleetSizing]:
    out = []
    for fleet in bp.fleets:
        if fleet.shape is None or fleet.nodes is None:
            continue
        result = FleetSizing(fleet.name, fleet.role)
        (_training if fleet.training else _inference)(bp, fleet, result)
        out.append(result)
    return out


@dataclass
class FleetCost:
    fleet: str
    instance: str | None
    nodes_min: int
    nodes_max: int
    usd_hour_min: float | None
    usd_hour_max: float | None
    note: str

    @property
    def usd_month_min(self) -> float | None:
        return None if self.usd_hour_min is None else self.usd_hour_min * HOURS_PER_MONTH

    @property
    def usd_month_max(self) -> float | None:
        return None if self.usd_hour_max is None else self.usd_hour_max * HOURS_PER_MONTH


def cost(bp: Blueprint) -> tuple[list[FleetCost], list[str]]:
    """Per-fleet cost at min and max size, and what could not be priced."""
    fleets, unpriced = [], []
    for fleet in bp.fleets:
        if fleet.nodes is None:
            continue
        price = fleet.instance.price_usd_hr if fleet.instance else None
        priced = price is not None and fleet.capacity_type in ("on-demand", "reservation")
        note = ("on-demand price, us-east-1 (catalog: AWS Price List API, 2026-07-20)" if priced
                else _unpriced(fleet))
        fleets.append(FleetCost(fleet.name, fleet.instance_type, fleet.nodes.min, fleet.nodes.max,
                                price * fleet.nodes.min if priced else None,
                                price * fleet.nodes.max if priced else None, note))
        if not priced:
            unpriced.append(f"fleet {fleet.name}: {note}")
        if fleet.scheduler is not None and fleet.scheduler.type == "slurm" and bp.cloud == "aws":
            unpriced.append(f"fleet {fleet.name}: the Slurm controller "
                            f"({fleet.scheduler.controller_instance_type or 'm7i.2xlarge'}) is not a GPU instance in "
                            "the catalog")
        if bp.cloud == "aws" and (efs := efs_cost_note(fleet)) is not None:  # a shared cache (fleetform/k8s.py)
            unpriced.append(efs)
        if fleet.login is not None and fleet.login.nodes and bp.cloud == "aws" and fleet.training:
            unpriced.append(f"fleet {fleet.name}: {fleet.login.nodes} login node(s) ({fleet.login.instance_type}), "
                            "not GPU instances in the catalog")
    for item in bp.storage:
        unpriced.append(f"storage {item.name} ({item.type}): no dated price in fleetform's catalog")
    if bp.cloud == "aws" and bp.region != "us-east-1" and any(f.usd_hour_min is not None for f in fleets):
        unpriced.append(f"prices are us-east-1's (the catalog's); {bp.region} prices differ")
    return fleets, unpriced


def as_dict(bp: Blueprint) -> dict:
    fleets, unpriced = cost(bp)
    priced = [f for f in fleets if f.usd_hour_min is not None]
    return {
        "sizing": [{"fleet": s.fleet, "role": s.role, "steps": [asdict(x) for x in s.steps], "notes": s.notes,
                    **({"slo": s.slo} if s.slo else {})} for s in sizing(bp)],
        "cost": {
            "fleets": [{"fleet": f.fleet, "instance_type": f.instance, "nodes": [f.nodes_min, f.nodes_max],
                        "usd_per_hour": [f.usd_hour_min, f.usd_hour_max],
                        "usd_per_month": [f.usd_month_min, f.usd_month_max], "note": f.note} for f in fleets],
            "total_usd_per_hour": [sum(f.usd_hour_min for f in priced), sum(f.usd_hour_max for f in priced)],
            "total_usd_per_month": [sum(f.usd_month_min for f in priced), sum(f.usd_month_max for f in priced)],
            "hours_per_month": HOURS_PER_MONTH,
            "priced_fleets": len(priced),
            "prices": PRICES if bp.cloud == "aws" else None,
            "unpriced": unpriced,
        },
    }
