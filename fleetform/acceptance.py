"""The acceptance job of a Slurm training fleet, as data: what `bin/acceptance` runs after `pulumi up`
or before a long job (docs/acceptance.md), and the bus bandwidth it must reach.

Two steps, each a Slurm job step over every node of the allocation:

- DCGM diagnostics on each node: `dcgmi diag -r LEVEL -j` (level 2 by default, 3 where the fleet's
  health suite is thorough); a node whose run fails, or whose JSON names a failed test, fails.
- nccl-tests' all_reduce_perf, one task per GPU across all nodes (`-g 1`), message sizes `-b MIN
  -e MAX -f 2`: the job fails when a result was wrong or when the "# Avg bus bandwidth" line
  (nccl-tests src/util.cu writeResultFooter: the mean busbw of every size, out-of-place and in-place,
  src/common.cu) is below the floor.

The floor is FLOOR_FRACTION of the mean of a published nccl-tests run over the same sizes on the same
instance type (providers/aws/nccl-allreduce.json, each row with its URL and date). An instance type
without a published run gets no floor (the acceptance-floor warning) unless the blueprint gives one.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Literal

from .records import frozen
from .slurm import PROGRAM_DIR, RENDERED_DIR

FLOOR_FRACTION = 0.8
"""The floor is 80 % of the published mean bus bandwidth. nccl-tests' own check (NCCL_TESTS_MIN_BW,
src/common.cu and src/util.cu) fails a run below 0.9 x the value given; fleetform leaves a wider margin
because the published runs are of 2 nodes and a ring's bus bandwidth falls a little as nodes are added (so larger fleets are tested as pairs),
and because nccl-tests results vary from run to run by several percent."""

DEFAULT_MIN_BYTES = 536870912  # 512 MiB
DEFAULT_MAX_BYTES = 2147483648  # 2 GiB
"""Sizes of an all-reduce without a published run (single-node fleets, on-prem): large messages, where
bus bandwidth is near its peak and the measure is stable."""

STEP_FACTOR = 2

DCGM_TIMEOUT_S = {0: 0, 1: 300, 2: 900, 3: 3600}
"""What bin/acceptance gives `dcgmi diag -r LEVEL` on a node: DCGM's levels 1 (quick, "normally lasting
seconds"), 2 (medium, about two minutes) and 3 (long, about 15 minutes) (DCGM dcgmi-diag reference,
https://docs.nvidia.com/datacenter/dcgm/latest/reference/command-line-reference/dcgmi/dcgmi-diag.html),
with a margin: the job's node-wide timeout, not a measure."""

ALL_REDUCE_TIMEOUT_S = 1800
"""What bin/acceptance gives the all-reduce step (nccl-tests' 2 GiB runs take seconds; a hang on a bad
EFA path is what this bounds)."""

ALL_REDUCE_PERF = "all_reduce_perf"
"""The nccl-tests program on the nodes' PATH; the ALL_REDUCE_PERF environment variable names another
(the Deep Learning AMI keeps it under /usr/local/cuda-*/efa/test-cuda-*/)."""

NCCL_ENV_FILE = "/etc/fleetform/nccl.env"
"""Where a node keeps its fleet's NCCL environment: bin/bootstrap (AWS, compute()) and bin/update copy the
rendered <fleet>/nccl.env there; on-prem the site installs it at the same path."""

JOB_NCCL_ENV_DIR = "/run/fleetform/jobs"
"""bin/prolog pins a job's nccl.env at JOB_NCCL_ENV_DIR/<job id>/nccl.env (bin/update pin_job): one artifact
version for the whole job. The batch script sources it when present, else NCCL_ENV_FILE."""

EFA_LIBRARY_PATH = ("/opt/amazon/efa/lib", "/opt/amazon/openmpi/lib", "/opt/amazon/ofi-nccl/lib")
"""Prepended to LD_LIBRARY_PATH on EFA fleets (those of them that exist on the node): libfabric with its EFA
provider, Open MPI (nccl-tests built with MPI=1 links it), and the aws-ofi-nccl plugin NCCL loads as its net
plugin, as the DLAMI's nccl-tests run in aws-samples/awsome-distributed-training micro-benchmarks/nccl-tests
sets them (`-x LD_LIBRARY_PATH=/opt/nccl/build/lib:/usr/local/cuda/lib64:/opt/amazon/efa/lib:/opt/amazon/openmpi/lib:
/opt/amazon/ofi-nccl/lib:$LD_LIBRARY_PATH`)."""

EFA_NETWORKS = ("Libfabric", "AWS Libfabric", "OFI")
"""What NCCL's `Using network %s` line (NCCL src/init.cc, INFO at NCCL_INIT) names when aws-ofi-nccl carries the
all-reduce: its plugin is "Libfabric" since 1.12, "AWS Libfabric" in 1.11.0 and before or with
NCCL_NET="AWS Libfabric", "OFI" with NCCL_NET=OFI (aws-ofi-nccl src/nccl_ofi_interface_nvidia.cpp,
nvidia_plugin_name_fixup). Anything else (NCCL's built-in "Socket" or "IB") is not EFA."""

NET_DEBUG_ENV = (("NCCL_DEBUG", "INFO"), ("NCCL_DEBUG_SUBSYS", "INIT,NET"))
"""What the all-reduce steps of an EFA fleet run with, so NCCL prints its `Using network` line: INFO level,
only the INIT and NET subsystems (the line is INFO(NCCL_INIT, ...); NET adds the plugin's own lines) to keep
the log small. bin/task-prolog exports nccl.env's variables only where the task has none, so these win."""


@frozen
class Published:
    """A published nccl-tests all_reduce_perf run (providers/aws/nccl-allreduce.json)."""

    instance_type: str
    nodes: int | None
    sizes: tuple[int, ...]
    mean_busbw_gbps: float  # the mean of every row's out-of-place and in-place busbw, as nccl-tests' average
    url: str
    date: str


@frozen
class AcceptanceConfig:
    fleet: str
    nodes: int  # sbatch --nodes: every node of the fleet (elastic nodes are powered up)
    gpus_per_node: int  # tasks per node: one per GPU, each all_reduce_perf -g 1
    all_reduce: Literal["pairs", "multi-node", "single-node", "off"]
    min_bytes: int
    max_bytes: int
    step_factor: int
    floor_gbps: float | None  # None: no floor known; the job reports the bandwidth and checks only #wrong
    pair_floor_gbps: float | None  # the floor of each 2-node pair (pairs mode, or multi-node before the fleet run)
    floor_source: str  # where the floor comes from, printed by the job and in the rendered json
    published: Published | None
    dcgm_level: int  # dcgmi diag -r
    dcgm_timeout_s: int
    all_reduce_timeout_s: int
    time_limit_min: int  # sbatch --time
    program: str  # bin/acceptance on the nodes
    efa: bool  # the fleet's fabric is EFA: the all-reduce must go through aws-ofi-nccl
    fi_provider: str | None  # FI_PROVIDER of the batch script (EFA fleets: efa)
    library_path: tuple[str, ...]  # prepended to LD_LIBRARY_PATH where the directory exists
    networks: tuple[str, ...]  # what NCCL's `Using network` line must name (empty: not checked)
    net_debug_env: tuple[tuple[str, str], ...]  # the all-reduce steps' NCCL_DEBUG settings (EFA fleets)
    nccl_env_file: str
    job_nccl_env_dir: str
    path: tuple  # where the blueprint sets it (the fleet's `acceptance`, or the fleet when defaulted)
    declared: frozenset  # the keys the blueprint wrote in `acceptance`

    @property
    def tasks(self) -> int:
        return self.nodes * self.gpus_per_node if self.all_reduce == "multi-node" else \
            2 * self.gpus_per_node if self.all_reduce == "pairs" else self.gpus_per_node

    @property
    def all_reduce_args(self) -> tuple[str, ...]:
        return ("-b", str(self.min_bytes), "-e", str(self.max_bytes), "-f", str(self.step_factor), "-g", "1")

    @property
    def config_file(self) -> str:
        return self.program + ".json"

    @property
    def batch_script(self) -> str:
        return self.program + ".sbatch"


@lru_cache(maxsize=1)
def published_runs() -> dict[str, Published]:
    text = resources.files("fleetform.providers.aws").joinpath("nccl-allreduce.json").read_text(encoding="utf-8")
    data = json.loads(text)
    runs = {}
    for row in data["rows"]:
        source = data["sources"][row["source"]]
        values = [v for _size, out_of_place, in_place in row["results"] for v in (out_of_place, in_place)]
        runs[row["instance_type"]] = Published(
            instance_type=row["instance_type"], nodes=row["nodes"],
            sizes=tuple(size for size, _o, _i in row["results"]),
            mean_busbw_gbps=round(sum(values) / len(values), 2), url=source["url"], date=source["date"])
    return runs


def build(fleet, data: dict | None, health, cloud: str) -> AcceptanceConfig | None:
    """The acceptance job of a training fleet scheduled by Slurm whose node shape is known."""
    if fleet.slurm is None or fleet.shape is None or fleet.nodes is None:
        return None
    data = data or {}
    nodes = fleet.nodes.max
    published = published_runs().get(fleet.instance_type or "") if cloud == "aws" else None
    # a published figure judges 2-node all-reduces only: with more nodes NCCL picks other algorithms and the
    # per-step latency grows, so the fleet is tested as disjoint 2-node pairs against it (issue 20); a figure
    # whose node count is not stated (p5en) judges nothing
    two_node = published is not None and published.nodes == 2
    default = "pairs" if nodes > 2 and two_node else "multi-node" if nodes > 1 else "single-node"
    all_reduce = data.get("all_reduce", default)
    min_bytes, max_bytes = DEFAULT_MIN_BYTES, DEFAULT_MAX_BYTES
    floor, source = None, "none: no published nccl-tests run for these nodes (providers/aws/nccl-allreduce.json)"
    pair_floor = None
    if published is not None and not two_node and all_reduce in ("pairs", "multi-node"):
        source = (f"none: the published nccl-tests run on {published.instance_type} ({published.url}) does not "
                  "state its node count")
    if all_reduce in ("pairs", "multi-node") and two_node:
        min_bytes, max_bytes = min(published.sizes), max(published.sizes)
        pair_floor = round(published.mean_busbw_gbps * FLOOR_FRACTION, 1)
        pair_source = (f"{FLOOR_FRACTION:g} x {published.mean_busbw_gbps:g} GB/s, the mean busbw of a published "
                       f"2-node nccl-tests run on {published.instance_type} ({published.url}, {published.date})")
        if all_reduce == "pairs" or nodes <= 2:
            floor, source = pair_floor, pair_source
        else:
            source = f"none for the whole fleet (information); each 2-node pair: {pair_source}"
    elif all_reduce == "single-node":
        source = "none: the published runs are multi-node over EFA; a single node's all-reduce is reported, not judged"
    if "nccl_min_busbw_gbps" in data:
        floor = float(data["nccl_min_busbw_gbps"])
        source = "the blueprint's acceptance.nccl_min_busbw_gbps"
    suite = health.suite if health is not None else None
    level = data.get("dcgm_level", 3 if suite == "thorough" else 2)
    aws = cloud == "aws"
    program_dir = f"{RENDERED_DIR}/{fleet.name}/slurm/bin" if aws else PROGRAM_DIR
    reduce_s = ALL_REDUCE_TIMEOUT_S if all_reduce != "off" else 0
    efa = fleet.interconnect is not None and fleet.interconnect.fabric == "efa"
    return AcceptanceConfig(
        fleet=fleet.name, nodes=nodes, gpus_per_node=fleet.shape.gpu_count, all_reduce=all_reduce,
        min_bytes=min_bytes, max_bytes=max_bytes, step_factor=STEP_FACTOR, floor_gbps=floor,
        pair_floor_gbps=pair_floor if all_reduce == "pairs" or nodes > 2 else None,
        floor_source=source, published=published if pair_floor is not None and "nccl_min_busbw_gbps" not in data
        else None, dcgm_level=level, dcgm_timeout_s=DCGM_TIMEOUT_S[level], all_reduce_timeout_s=reduce_s,
        time_limit_min=(DCGM_TIMEOUT_S[level] + reduce_s) // 60 + 5, program=f"{program_dir}/acceptance",
        efa=efa, fi_provider="efa" if efa else None, library_path=EFA_LIBRARY_PATH if efa else (),
        networks=EFA_NETWORKS if efa else (), net_debug_env=NET_DEBUG_ENV if efa else (),
        nccl_env_file=NCCL_ENV_FILE, job_nccl_env_dir=JOB_NCCL_ENV_DIR,
        path=fleet.path + ("acceptance",) if data else fleet.path, declared=frozenset(data),
    )


@frozen
class ModelCheck:
    """One model of an inference fleet on Kubernetes, as <fleet>/acceptance/accept-models asks it for a
    completion: through its Service, within its startup budget."""

    service: str
    namespace: str
    port: int
    served_name: str  # vLLM's --served-model-name: the `model` of the request
    budget_s: int  # the startup probe's period x failure threshold (fleetform/k8s.py): how long a replica may take
    api_key_secret: str | None = None  # the Secret whose VLLM_API_KEY the server requires as a bearer token


API_KEY_ENV = "VLLM_API_KEY"
"""The variable (and Secret key, fleetform/k8s.py) through which a model's api_key_secret reaches vLLM. With it set,
vLLM's AuthenticationMiddleware answers 401 to any /v1 request without `Authorization: Bearer KEY`
(vllm/entrypoints/openai, AuthenticationMiddleware.verify_token), so accept-models reads the key from the
Secret and sends it."""


def model_checks(kube) -> tuple[ModelCheck, ...]:
    """The models of an inference fleet on Kubernetes (its KubeFleet), each with its startup budget."""
    if kube is None:
        return ()
    checks = []
    for server in kube.servers:
        startup = next(p for p in server.probes if p.kind == "startup")
        api_key = next((e.secret for e in server.secret_env if e.name == API_KEY_ENV), None)
        checks.append(ModelCheck(server.name, server.namespace, server.port, server.name,
                                 startup.period_s * startup.failure_threshold, api_key))
    return tuple(checks)
