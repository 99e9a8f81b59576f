"""Tests at the edges (issue 24 item 6): the derived Slurm facts as values of their own, not only as
bytes of a golden file a regeneration could accept unread; and the numeric rules and limits on
both sides of their edge (a value exactly at a limit or a step, a minimum equal to its maximum).

Each expected number is worked out here from the instance's catalog facts
(providers/aws/instances.json: p5.48xlarge 2048 GiB, 8 GPUs, 192 vCPUs; g6.12xlarge 192 GiB, 4 GPUs,
48 vCPUs; g6.xlarge 16 GiB, 1 GPU, 4 vCPUs) and fleetform's documented shares (fleetform/slurm.py:
RealMemory 95% of the memory, MemSpecLimit 2% of it but at least 2048 MiB), so a changed share, a
lost floor or a rounding that moved is a failure here, whatever the golden files say.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import AWS_TRAINING_HEAD
from fleetform.pipeline import check
from fleetform.render import render


def _model(text: str, tmp_path: Path):
    path = tmp_path / "bp.yaml"
    path.write_text(text)
    result = check(path)
    assert result.model is not None, [f.to_text() for f in result.findings]
    return result.model


def _training(instance: str, nodes: str, tmp_path: Path):
    return _model(AWS_TRAINING_HEAD + f"    instance_type: {instance}\n    nodes: {nodes}\n    scheduler: {{type: slurm}}\n",
                  tmp_path)


# --- the derived Slurm facts ------------------------------------------------------------------------

SLURM_FACTS = {
    # instance: (RealMemory, MemSpecLimit, DefMemPerGPU, DefCpuPerGPU, CPUs)
    # 2048 GiB = 2097152 MiB: x 0.95 = 1992294.4; x 0.02 = 41943.04 (above the 2048 floor);
    # (1992294 - 41943) / 8 = 243793.9; 192 / 8 = 24
    "p5.48xlarge": (1992294, 41943, 243793, 24, 192),
    # 192 GiB = 196608 MiB: x 0.95 = 186777.6; x 0.02 = 3932.16; (186777 - 3932) / 4 = 45711.25; 48 / 4 = 12
    "g6.12xlarge": (186777, 3932, 45711, 12, 48),
    # 16 GiB = 16384 MiB: x 0.95 = 15564.8; x 0.02 = 327.68, below the floor: 2048; 15564 - 2048 = 13516
    "g6.xlarge": (15564, 2048, 13516, 4, 4),
}


@pytest.mark.parametrize("instance", list(SLURM_FACTS))
def test_slurm_memory_facts_are_these_values(instance, tmp_path):
    real, spec, per_gpu, cpu_per_gpu, cpus = SLURM_FACTS[instance]
    model = _training(instance, "2", tmp_path)
    slurm = model.fleets[0].slurm
    (line,) = slurm.nodes
    assert (line.real_memory_mib, line.mem_spec_limit_mib, line.cpus) == (real, spec, cpus)
    assert (slurm.def_mem_per_gpu_mib, slurm.def_cpu_per_gpu) == (per_gpu, cpu_per_gpu)
    conf = render(model)["train/slurm/slurm.conf"].decode().splitlines()
    (node,) = [x for x in conf if x.startswith("NodeName=")]
    assert f" CPUs={cpus} " in node and f" RealMemory={real} MemSpecLimit={spec} " in node
    assert f"DefMemPerGPU={per_gpu}" in conf and f"DefCpuPerGPU={cpu_per_gpu}" in conf
    # what jobs may use is what the per-GPU default hands out, never more than the node has
    gpus = int(line.gres.rsplit(":", 1)[1])
    assert per_gpu * gpus <= real - spec < (per_gpu + 1) * gpus


def test_static_nodes_weigh_less_than_cloud_nodes(tmp_path):
    """Slurm allocates the lowest Weight first (slurm.conf(5) Weight): the nodes kept running (the
    fleet's minimum) weigh 1, those powered up on demand 100, so a job lands on a running node."""
    model = _training("p5.48xlarge", "{min: 2, max: 4}", tmp_path)
    lines = [(n.names, n.weight, n.state) for n in model.fleets[0].slurm.nodes]
    assert lines == [("train-[001-002]", 1, "CLOUD"), ("train-[003-004]", 100, "CLOUD")]
    conf = render(model)["train/slurm/slurm.conf"].decode()
    assert "NodeName=train-[001-002] " in conf and " Weight=1 State=CLOUD\n" in conf
    assert " Weight=100 State=CLOUD\n" in conf and "SuspendExcNodes=train-[001-002]" in conf
    # a minimum equal to the maximum: every node is static, none weighs 100
    fixed = _training("p5.48xlarge", "{min: 3, max: 3}", tmp_path)
    assert [(n.names, n.weight) for n in fixed.fleets[0].slurm.nodes] == [("train-[001-003]", 1)]


def test_on_prem_static_nodes_are_not_cloud_nodes(tmp_path):
    from variants import VARIANTS

    model = _model(VARIANTS["onprem-tcp"], tmp_path)
    assert [(n.names, n.weight, n.state) for n in model.fleets[0].slurm.nodes] == [("node[1-3]", 1, None)]


DRIVER = """
import importlib.machinery, importlib.util, json, sys
bin_dir, env = sys.argv[1], json.loads(sys.argv[2])
sys.path.insert(0, bin_dir)
loader = importlib.machinery.SourceFileLoader("bootstrap", bin_dir + "/bootstrap")
bootstrap = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
loader.exec_module(bootstrap)
bootstrap.hosts_entry(env)
"""


def test_the_bootstrap_writes_the_controllers_host_entry_once(tmp_path):
    """Every machine resolves the controller's name: bootstrap's hosts_entry appends `ADDR NAME` to
    /etc/hosts (under FLEETFORM_ROOT here), keeps what was there, and adds nothing the second time."""
    import awslocal

    slurm = awslocal.render_fleet(tmp_path, awslocal.blueprint("2"))
    root = tmp_path / "root"
    (root / "etc").mkdir(parents=True)
    (root / "etc/hosts").write_text("127.0.0.1 localhost")  # no final newline

    def step():
        done = subprocess.run([sys.executable, "-c", DRIVER, str(slurm / "bin"),
                               json.dumps({"FLEETFORM_CONTROLLER_ADDR": "10.0.0.10"})],
                              capture_output=True, text=True, timeout=60,
                              env={"FLEETFORM_ROOT": str(root), "PATH": "/usr/bin:/bin"})
        assert done.returncode == 0, done.stdout + done.stderr

    step()
    assert (root / "etc/hosts").read_text() == "127.0.0.1 localhost\n10.0.0.10 train-controller\n"
    step()
    assert (root / "etc/hosts").read_text() == "127.0.0.1 localhost\n10.0.0.10 train-controller\n"


# --- numeric rules and limits on both sides of their edge -------------------------------------------

def _reference() -> dict:
    import yaml

    return yaml.safe_load(Path("blueprints/reference.yaml").read_text())


def _set(data: dict, path: str, value) -> None:
    *parents, last = [int(p) if p.isdigit() else p for p in path.split(".")]
    for key in parents:
        data = data[key]
    data[last] = value


def _findings(data: dict, tmp_path: Path) -> set[tuple[str, str]]:
    import yaml

    path = tmp_path / "edge.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return {(f.rule, f.path) for f in check(path).findings}


EDGES = [
    # (rule, path the rule reports, {field: value at the edge}, {field: value one step past it})
    ("network", "provider.network.cidr", {"provider.network.cidr": "10.40.0.0/16"},
     {"provider.network.cidr": "10.40.0.0/15"}),
    ("network", "provider.network.cidr", {"provider.network.cidr": "10.40.0.0/28"},
     {"provider.network.cidr": "10.40.0.0/29"}),
    ("fsx-capacity", "storage[0].capacity_gib", {"storage.0.capacity_gib": 1200}, {"storage.0.capacity_gib": 1201}),
    ("fsx-capacity", "storage[0].capacity_gib", {"storage.0.capacity_gib": 2400}, {"storage.0.capacity_gib": 2399}),
    ("fsx-capacity", "storage[0].capacity_gib", {"storage.0.capacity_gib": 4800}, {"storage.0.capacity_gib": 3600}),
    # a minimum equal to its maximum is a fixed size, not an error
    ("size-range", "fleets[1].nodes.min", {"fleets.1.nodes": {"min": 10, "max": 10}},
     {"fleets.1.nodes": {"min": 11, "max": 10}}),
    ("size-range", "fleets[1].models[0].replicas.min", {"fleets.1.models.0.replicas": {"min": 20, "max": 20}},
     {"fleets.1.models.0.replicas": {"min": 21, "max": 20}}),
    # nodes_per_switch may equal the fleet's size (one leaf), not exceed it
    ("slurm-topology", "fleets[0].scheduler.topology.nodes_per_switch",
     {"fleets.0.scheduler.topology.nodes_per_switch": 6}, {"fleets.0.scheduler.topology.nodes_per_switch": 7}),
    # 1,024 leaf switches at most: 2,048 nodes two a switch is 1,024; 2,049 makes 1,025
    ("slurm-topology", "fleets[0].scheduler.topology.nodes_per_switch", {"fleets.0.nodes": 2048},
     {"fleets.0.nodes": 2049}),
    # tensor_parallel divides a node's 8 GPUs: 8 does, 6 does not
    ("tensor-parallel", "fleets[1].models[0].tensor_parallel", {"fleets.1.models.0.tensor_parallel": 8},
     {"fleets.1.models.0.tensor_parallel": 6}),
    # tensor parallel within a node: 8 is one p5's GPUs; 16 spans two nodes (a LeaderWorkerSet group)
    ("lws-tp-within-node", "fleets[1].models[0].tensor_parallel", {"fleets.1.models.0.tensor_parallel": 8},
     {"fleets.1.models.0.tensor_parallel": 16}),
    # time-slicing shares each GPU 2 ways or more
    ("gpu-sharing", "fleets[2].gpu_sharing.replicas", {"fleets.2.gpu_sharing": {"strategy": "time-slicing", "replicas": 2}},
     {"fleets.2.gpu_sharing": {"strategy": "time-slicing", "replicas": 1}}),
    # the SLO's replicas: ceil(120/30) = 4 GPUs, +1 spare = 5, x1.5 = 7.5 -> 8 GPUs, / tp 4 = 2 = replicas.min;
    # 121 QPS: 5 GPUs, 6, x1.5 = 9, / 4 -> 3 replicas, more than the minimum of 2
    ("slo-replicas", "fleets[1].models[0].replicas", {"fleets.1.models.0.slo.peak_qps": 120},
     {"fleets.1.models.0.slo.peak_qps": 121}),
    # a fraction of a GPU is a whole GPU: 150 QPS = 5 GPUs, 6 with the spare, x1.25 = 7.5 -> 8, 2 replicas;
    # 151 QPS = 6, 7, x1.25 = 8.75 -> 9 GPUs, 3 replicas (rounded down, 8 GPUs would say 2)
    ("slo-replicas", "fleets[1].models[0].replicas",
     {"fleets.1.models.0.slo.peak_qps": 150, "fleets.1.models.0.slo.burst_headroom": 0.25},
     {"fleets.1.models.0.slo.peak_qps": 151, "fleets.1.models.0.slo.burst_headroom": 0.25}),
    ("slo-replicas", "fleets[1].models[0].replicas", {"fleets.1.models.0.replicas": {"min": 2, "max": 20}},
     {"fleets.1.models.0.replicas": {"min": 1, "max": 20}}),
    # the Kubernetes versions fleetform renders for: 1.25 to 1.37 (both inference fleets share the cluster's)
    ("k8s-version", "fleets[1].scheduler.version",
     {"fleets.1.scheduler.version": "1.25", "fleets.2.scheduler.version": "1.25"},
     {"fleets.1.scheduler.version": "1.24", "fleets.2.scheduler.version": "1.24"}),
    ("k8s-version", "fleets[1].scheduler.version",
     {"fleets.1.scheduler.version": "1.37", "fleets.2.scheduler.version": "1.37"},
     {"fleets.1.scheduler.version": "1.38", "fleets.2.scheduler.version": "1.38"}),
]


@pytest.mark.parametrize("rule, where, at, past", EDGES,
                         ids=[f"{e[0]}:{next(iter(e[3].values()))}" for e in EDGES])
def test_a_numeric_rule_holds_at_its_edge_and_fires_one_step_past(rule, where, at, past, tmp_path):
    data = _reference()
    for field, value in at.items():
        _set(data, field, value)
    assert (rule, where) not in _findings(data, tmp_path), f"{rule} fired at its edge"
    data = _reference()
    for field, value in past.items():
        _set(data, field, value)
    assert (rule, where) in _findings(data, tmp_path), f"{rule} did not fire one step past its edge"


def test_multinode_tcp_training_warns_from_two_nodes(tmp_path):
    """efa-multinode: one node needs no fabric; two nodes on an instance without EFA do."""
    for nodes, expected in ((1, set()), (2, {("efa-multinode", "fleets[0].instance_type")})):
        path = tmp_path / "tcp.yaml"
        path.write_text(AWS_TRAINING_HEAD + f"    instance_type: g5.xlarge\n    nodes: {nodes}\n"
                        "    scheduler: {type: slurm}\n")
        found = {(f.rule, f.path) for f in check(path).findings if f.rule == "efa-multinode"}
        assert found == expected, nodes


def test_the_largest_fleet_is_at_the_hostlist_limit(tmp_path):
    """Slurm's hostlist parser takes 65,536 hosts in one range (MAX_RANGE, fleetform/slurm.py): a fleet
    of exactly that many renders, one more is refused, by the schema or by size-range."""
    from fleetform.slurm import MAX_HOSTS

    assert MAX_HOSTS == 65_536
    for nodes, ok in ((MAX_HOSTS, True), (MAX_HOSTS + 1, False)):
        path = tmp_path / "huge.yaml"
        path.write_text(AWS_TRAINING_HEAD + f"    instance_type: p5.48xlarge\n    nodes: {nodes}\n"
                        "    scheduler: {type: slurm, topology: {nodes_per_switch: 64}}\n")
        errors = [(f.rule, f.path) for f in check(path).findings if f.severity.value == "error"]
        assert (errors == []) is ok, (nodes, errors)
        if not ok:
            assert errors == [("size-range", "fleets[0].nodes")] or errors[0][0] == "schema", errors


def test_a_capacity_block_run_of_182_days_fits_and_a_longer_one_warns(tmp_path):
    """capacity-duration: the longest Capacity Block is 182 days (EC2 DescribeCapacityBlockOfferings,
    CapacityDurationHours: 7-day steps up to 182 days). The reference trains 70B parameters on 6 x 8
    H100 at MFU 0.4: 6 x 70e9 x tokens FLOPs / (48 x peak x 0.4) lasts 182 days at exactly these tokens."""
    from fleetform.catalog import load_catalog

    peak = load_catalog().instance("p5.48xlarge").gpu.bf16_dense_tflops * 1e12
    tokens_at_edge = 182 * 86400 * 48 * peak * 0.4 / (6 * 70e9) / 1e9  # billions of tokens
    for tokens, warns in ((tokens_at_edge * (1 - 1e-9), False), (tokens_at_edge * (1 + 1e-6), True)):
        data = _reference()
        _set(data, "fleets.0.workload.tokens_billion", round(tokens, 6))
        found = ("capacity-duration", "fleets[0].capacity.type") in _findings(data, tmp_path)
        assert found is warns, tokens


@pytest.mark.parametrize("what, build", [
    # root mapping + list + k scalars (keys are not counted): 199,998 scalars are 200,000 values
    ("values", lambda n: ("x: [" + "0," * (n - 2) + "]\n").encode()),
    # the root mapping is depth 0: n nested lists reach depth n
    ("depth", lambda n: ("x: " + "[" * n + "]" * n + "\n").encode()),
    ("bytes", lambda n: b"x: " + b"a" * (n - 4) + b"\n"),
])
def test_the_loaders_bounds_hold_at_their_edge_and_refuse_one_more(what, build):
    from fleetform.loader import MAX_BYTES, MAX_DEPTH, MAX_NODES, LoadError, parse

    edge = {"values": 200_000, "depth": 63, "bytes": 4 * 1024 * 1024}[what]
    assert (MAX_NODES, MAX_DEPTH + 0, MAX_BYTES) == (200_000, 64, 4 * 1024 * 1024)
    parse(build(edge), "edge.yaml")  # at the edge: read
    with pytest.raises(LoadError) as refused:
        parse(build(edge + 1), "edge.yaml")
    assert [f.rule for f in refused.value.findings] == ["yaml-size"]


@pytest.mark.parametrize("version, before_23_11", [("22.05", True), ("23.02", True), ("23.11", False), ("24.05", False)])
def test_power_saving_and_version_gated_slurm_values(version, before_23_11, tmp_path):
    """The values slurm.conf and cgroup.conf print for an elastic AWS fleet, each as a value: a GPU
    instance is given 30 minutes to boot (ResumeTimeout), an idle cloud node 10 minutes
    (SuspendTime); fan-out is off for cloud nodes not in DNS (TreeWidth 65533, SchedMD CHANGELOG
    23.02); a cloud node may register with 90% of RealMemory; and the keys Slurm 23.11 removed
    (cloud_reg_addrs, CgroupAutomount: CHANGELOG/slurm-23.11.md) are written only before it, the
    edge being 23.11 itself."""
    model = _model(AWS_TRAINING_HEAD + "    instance_type: p5.48xlarge\n    nodes: {min: 2, max: 4}\n"
                   f"    image: ami-0123456789abcdef0\n    scheduler: {{type: slurm, slurm_version: \"{version}\"}}\n",
                   tmp_path)
    files = render(model)
    conf = files["train/slurm/slurm.conf"].decode().splitlines()
    for line in ("TreeWidth=65533", "ResumeTimeout=1800", "SuspendTime=600", "SuspendTimeout=300", "ResumeRate=0",
                 "SuspendRate=0", "SuspendExcNodes=train-[001-002]", "GresTypes=gpu",
                 "SelectTypeParameters=CR_Core_Memory"):
        assert line in conf, line
    parameters = "idle_on_node_suspend,power_save_min_interval=30,node_reg_mem_percent=90"
    assert f"SlurmctldParameters={'cloud_reg_addrs,' if before_23_11 else ''}{parameters}" in conf
    cgroup = files["train/slurm/cgroup.conf"].decode().splitlines()
    assert ("CgroupAutomount=yes" in cgroup) is before_23_11
    assert {"ConstrainCores=yes", "ConstrainDevices=yes", "ConstrainRAMSpace=yes"} <= set(cgroup)


# --- kv-cache-room: the KV cache's share of usable GPU memory at its edge ----------------------------

def test_kv_cache_room_fires_exactly_where_the_share_drops_below_its_floor(tmp_path):
    """kv-cache-room warns when the weights and vLLM's per-GPU overhead leave less than
    KV_CACHE_MIN_SHARE (20%) of the usable GPU memory (GPU memory x gpu_memory_utilization x
    tensor_parallel) for the KV cache. The model's size moves in steps of 0.1 billion parameters on
    one L4 (fp8, 1 byte a parameter): the last size without the warning must leave at least 20%,
    the first with it less, each share worked out here from the resolved model's own numbers; a
    floor moved, `<` turned into `<=`, or the overhead left out moves the edge and fails."""
    from fleetform.rules.inference import KV_CACHE_MIN_SHARE

    text = (Path(__file__).parent.parent / "blueprints/inference-l4.yaml").read_text()

    def at(params: float):
        path = tmp_path / "bp.yaml"
        path.write_text(text.replace("model_params_billion: 7.6", f"model_params_billion: {params:.1f}", 1))
        result = check(path)
        assert result.model is not None, [f.to_text() for f in result.findings]
        fleet = next(f for f in result.model.fleets if f.models)
        m = next(x for x in fleet.models if x.name == "qwen-7b")
        usable = m.tensor_parallel * fleet.devices()[1] * m.gpu_memory_utilization
        share = (usable - m.weights_gb - m.overhead_gb) / usable
        fired = any(f.rule == "kv-cache-room" and f.path.startswith("fleets[0].models[0].") for f in result.findings)
        return fired, share

    edge = None
    for tenths in range(76, 190):  # model-fits takes over from 19.6 billion on
        fired, share = at(tenths / 10)
        if fired:
            edge = tenths
            break
    assert edge is not None and edge > 76, "no edge found between 7.6 and 19 billion parameters"
    below, share_below = at((edge - 1) / 10)
    above, share_above = at(edge / 10)
    assert not below and share_below >= KV_CACHE_MIN_SHARE, (edge, share_below)
    assert above and share_above < KV_CACHE_MIN_SHARE, (edge, share_above)
