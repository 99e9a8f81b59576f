"""The Slurm configuration of a training fleet, as data: every value slurm.conf, gres.conf,
cgroup.conf and topology.conf print, computed here so the templates compute nothing.

Node names are hostlist ranges (`train-[001-006]`): a config's size grows with node groups and
switches, not with nodes.
"""

from __future__ import annotations

import json
import posixpath
import re

import hostlist

from .records import frozen

SLURM_VERSIONS = ("22.05", "23.02", "23.11", "24.05", "24.11", "25.05", "25.11")
"""Slurm releases fleetform renders for (YY.MM)."""

DEFAULT_SLURM_VERSION = "23.11"
MEMORY_SHARE = 0.95
"""RealMemory is 95% of the node's nominal memory: what the kernel reliably reports of it (AWS
ParallelCluster's `realmemory_to_ec2memory_ratio`), so a node never registers with less."""
MEM_SPEC_SHARE, MEM_SPEC_MIN_MIB = 0.02, 2048
"""MemSpecLimit: of RealMemory, 2% of the node's memory (at least 2 GiB) stays with the OS, slurmd
and the Lustre client; jobs share the rest (slurm.conf(5) MemSpecLimit)."""
NODE_REG_MEM_PERCENT = 90
"""A cloud node may register with 90% of RealMemory before Slurm calls it invalid (Slurm's default
for State=CLOUD nodes, written out so it does not change under us; slurm.conf(5))."""
POWER_SAVE_MIN_INTERVAL_S = 30
CLOUD_TREE_WIDTH = 65533
"""Cloud nodes are not in DNS: slurmd cannot forward to its peers by name, so fan-out is off
(TreeWidth's maximum; SchedMD CHANGELOG 23.02: unresolvable cloud nodes must set it large)."""

STATIC_WEIGHT, CLOUD_WEIGHT = 1, 100
"""Slurm picks lower weights first: running static nodes before powered-down cloud nodes."""

RESUME_TIMEOUT_S = 1800  # a GPU instance boots, pulls its image and mounts FSx within 30 minutes
SUSPEND_TIME_S = 600  # an idle cloud node is stopped after 10 minutes
SUSPEND_TIMEOUT_S = 300
PROGRAM_DIR = "/opt/fleetform/slurm/bin"  # on-prem: where the site installs <fleet>/slurm/bin/
RENDERED_DIR = "/opt/fleetform/rendered"
"""On AWS the user data extracts the rendered folder here (docs/aws-training.md)."""

FEATURES_SINCE = {"auth/slurm": "23.11"}
"""Features that need a newer Slurm than the oldest fleetform renders for."""
REMOVED_IN = {"CgroupAutomount": "23.11", "cloud_reg_addrs": "23.11", "PrivateData=cloud": "23.02"}
"""Keys removed from Slurm's config files in a release: not written for that release or later
(SchedMD CHANGELOG/slurm-23.11.md: "Remove CgroupAutomount= option from cgroup.conf", "Remove
cloud_reg_addrs and make it default behavior"; CHANGELOG/slurm-23.02.md: "Change cloud nodes to show
by default. PrivateData=cloud is no longer needed.")."""


_HOST_ITEM = re.compile(r"([^,\[]*)(?:\[([^\]]*)\])?[^,\[]*")


def host_count(expression: str) -> int:
    """Number of hosts in a schema-valid Slurm hostlist expression, counted without expanding it
    (so `gpu[0-999999999]` costs nothing). A range written high-low counts as empty."""
    total = 0
    for match in _HOST_ITEM.finditer(expression):
        if not match.group(0):
            continue
        ranges = match.group(2)
        if ranges is None:
            total += 1
            continue
        for part in ranges.split(","):
            low, _, high = part.partition("-")
            total += max(0, int(high or low) - int(low) + 1)
    return total


def reversed_range(expression: str) -> str | None:
    """The first range of a schema-valid hostlist expression written high-low (`06-01` of
    `dgx-[06-01]`), or None. Slurm's hostlist parser and python-hostlist refuse one ("start > stop")."""
    for match in _HOST_ITEM.finditer(expression):
        for part in (match.group(2) or "").split(","):
            low, _, high = part.partition("-")
            if high and int(high) < int(low):
                return part
    return None


MAX_HOSTS = 65_536
"""The most hosts one hostlist expression may name, and the most nodes of a fleet: Slurm's own
hostlist parser refuses a range of more (hostlist.c, MAX_RANGE 64K: slurmctld 22.05 stops with
"Too many hosts in range" on `train-[00001-100000]`, measured)."""

MAX_LEAF_SWITCHES = 1_024
"""The most leaf switches of a fleet's topology/tree. slurmctld's start grows with the square of the
switch count, not the node count (measured with slurmctld 22.05, benchmarks/slurmctld_topology.py):
a multi-level tree adds switches and is slower still, so the bound is on the leaves."""


def version_key(version: str) -> tuple[int, int]:
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


@frozen
class NodeLine:
    names: str  # hostlist expression
    cpus: int
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    real_memory_mib: int
    mem_spec_limit_mib: int  # of RealMemory, kept for the OS, slurmd and the Lustre client
    gres: str  # gpu:<type>:<count>
    features: str  # comma-separated
    weight: int
    state: str | None  # CLOUD: every AWS node, and on-prem nodes above an elastic fleet's minimum


@frozen
class GresLine:
    """One gres.conf line. It names no `Cores=` (gres.conf(5): without it any core may be used with
    the GPUs): which socket each GPU hangs off is a fact of the board that neither fleetform's
    catalog (providers/aws/instances.json, from EC2's DescribeInstanceTypes, which publishes no
    GPU-to-NUMA affinity) nor an on-prem blueprint's `hardware` holds, and a guessed `Cores=` would
    steer every job's CPUs to the wrong socket. Where slurmd is built with NVML, `AutoDetect=nvml`
    reads the affinity from the driver; Debian's and Ubuntu's slurmd packages are not, so fleetform
    writes the device files and leaves the cores free rather than wrong."""
    names: str
    type: str
    file: str  # /dev/nvidia[0-7]
    devices: int  # how many device files `file` names


@frozen
class PartitionLine:
    name: str
    nodes: str
    default: bool
    max_time: str
    priority_tier: int | None


@frozen
class SwitchLine:
    name: str
    nodes: str | None
    switches: str | None


@frozen
class PowerSaving:
    resume_program: str
    suspend_program: str
    resume_fail_program: str
    resume_timeout_s: int
    suspend_time_s: int
    suspend_timeout_s: int
    suspend_exclude: str | None  # the static nodes: never powered down
    resume_rate: int  # nodes started per minute; 0: no limit (the resume program launches all at once)
    suspend_rate: int


@frozen
class Ec2Nodes:
    """What the programs in <fleet>/slurm/bin/ know of an AWS fleet at render time. Deploy-time
    values (cluster id, region, launch template, secret, addresses) come from the node's
    /etc/fleetform/cluster.env, so the same rendered files serve every stack."""

    program_dir: str  # where the user data extracts <fleet>/slurm/bin/
    static_nodes: str | None  # powered up by the controller's bootstrap and keeper, never suspended
    elastic_nodes: str | None  # started by jobs, stopped after SuspendTime idle
    launched_with: str  # what an instance is launched with, as canonical JSON (node_generation)
    checkpoint_dir: str | None = None  # the fleet's checkpoint path on a shared file system, made writable by jobs

    @property
    def generation(self) -> str:
        """The digest of `launched_with`: a change rolls nodes. Computed when rendered, so validate,
        which derives this record for its checks, needs no digest (its import floor, issue 13)."""
        import hashlib

        return hashlib.sha256(self.launched_with.encode()).hexdigest()[:16]


@frozen
class SlurmConfig:
    cluster_name: str
    controller_host: str
    version: str
    auth_type: str
    cred_type: str
    gres_types: tuple[str, ...]
    nodes: tuple[NodeLine, ...]
    gres: tuple[GresLine, ...]
    partitions: tuple[PartitionLine, ...]
    switches: tuple[SwitchLine, ...]
    power: PowerSaving | None
    ec2: Ec2Nodes | None
    cgroup_automount: bool  # written only for releases that still have CgroupAutomount
    private_data_cloud: bool  # written only for power-saving clusters of releases before 23.02
    slurmctld_parameters: tuple[str, ...]
    tree_width: int | None  # None: Slurm's default
    all_nodes: str  # every node of the fleet, as one hostlist expression
    def_cpu_per_gpu: int  # a job that asks for GPUs but not for CPUs or memory gets its node's share
    def_mem_per_gpu_mib: int

    @property
    def prolog_flags(self) -> tuple[str, ...]:
        """Contain (a job container on every allocated node; it implies Alloc, slurm.conf(5)
        PrologFlags); on AWS Alloc written out: bin/prolog must run on every node of a job at
        allocation, before any task, so all of a job's ranks get one nccl.env."""
        return ("Alloc", "Contain") if self.ec2 is not None else ("Contain",)

    @property
    def topology_plugin(self) -> str | None:
        return "topology/tree" if self.switches else None

    @property
    def topology_from_ec2(self) -> bool:
        """On AWS topology.conf starts flat and the controller rewrites it from EC2's
        DescribeInstanceTopology (bin/topology): EC2, not the blueprint, knows the switches."""
        return self.ec2 is not None


def node_names(prefix: str, first: int, last: int, width: int) -> str:
    """`train-[001-006]` for nodes first..last (1-based), as a hostlist expression."""
    if first == last:
        return f"{prefix}-{first:0{width}d}"
    return f"{prefix}-[{first:0{width}d}-{last:0{width}d}]"


def name_width(count: int) -> int:
    return max(3, len(str(count)))


def cpu_layout(instance_name: str, vcpus: int) -> tuple[int, int, int]:
    """(sockets, cores per socket, threads per core) of an AWS GPU instance.

    EC2 reports DefaultCores = vCPUs / 2 and DefaultThreadsPerCore = 2 for every GPU instance in
    the catalog. The whole-host sizes (.48xlarge, and p4d/p4de.24xlarge) are dual-socket hosts
    (p5: 2 x AMD EPYC 7R13, p4d: 2 x Xeon 8275CL); smaller sizes are a slice of one socket.
    """
    family = instance_name.split(".")[0]
    sockets = 2 if instance_name.endswith(".48xlarge") or family in ("p4d", "p4de") else 1
    threads = 2
    return sockets, vcpus // (threads * sockets), threads


def node_generation(fleet) -> str:
    """What a running compute instance cannot take without being launched again, as canonical JSON
    (Ec2Nodes.generation is its digest): its instance type, image, network interfaces (EFA or not;
    the layout follows from the instance type), placement and capacity. resume tags it onto every instance (`fleetform:generation`); on day 2 the
    controller's bin/update drains each node whose instance carries another one and replaces it once
    its jobs end (docs/aws-training.md, "What a change does on the running cluster")."""
    facts = {"instance_type": fleet.instance_type, "image": fleet.image.launch_id if fleet.image else None,
             "fabric": fleet.interconnect.fabric if fleet.interconnect else None, "placement": fleet.placement,
             "capacity": fleet.capacity_type, "reservation": fleet.reservation_id}
    return json.dumps(facts, sort_keys=True)


def gpu_type(gpu_family: str) -> str:
    return gpu_family.lower()


def _partition_time(value: str | int | None) -> str:
    if value is None:
        return "UNLIMITED"
    return str(value)


def node_facts(fleet) -> tuple[str, str, int, int, int]:
    """(GPU type, features, CPUs, RealMemory MiB, MemSpecLimit MiB) of one node of a fleet whose shape is known:
    what its NodeName line and gres.conf say, whoever runs slurmctld (a Slurm fleet's controller, or Slinky's
    operator on EKS: fleetform/slinky.py)."""
    shape = fleet.shape
    type_ = gpu_type(shape.gpu.family)
    fabric = fleet.interconnect.fabric if fleet.interconnect else "tcp"
    features = ",".join(x for x in (fleet.instance_type, type_, fabric) if x)
    cpus = shape.sockets * shape.cores_per_socket * shape.threads_per_core
    memory = int(shape.memory_gib * 1024 * MEMORY_SHARE)
    mem_spec = max(MEM_SPEC_MIN_MIB, int(shape.memory_gib * 1024 * MEM_SPEC_SHARE))
    return type_, features, cpus, memory, mem_spec


def gpu_files(devices: int) -> str:
    """gres.conf's File= for a node's GPUs: /dev/nvidia0, or the range /dev/nvidia[0-7]."""
    return "/dev/nvidia0" if devices == 1 else f"/dev/nvidia[0-{devices - 1}]"


def gpu_defaults(fleet, cpus: int, memory: int, mem_spec: int) -> tuple[int, int]:
    """(DefCpuPerGPU, DefMemPerGPU MiB): a job that asks for GPUs but not for CPUs or memory gets its node's share."""
    return max(1, cpus // fleet.shape.gpu_count), (memory - mem_spec) // fleet.shape.gpu_count


def build(fleet, blueprint_name: str, region: str | None, cloud: str) -> SlurmConfig | None:
    """The Slurm config of a training fleet; None when the fleet is not (or not yet) one Slurm can
    describe: not scheduled by Slurm, or its node shape or size unknown (rules report why)."""
    scheduler, shape, size = fleet.scheduler, fleet.shape, fleet.nodes
    if scheduler is None or scheduler.type != "slurm" or shape is None or size is None or size.max < 1:
        return None
    if shape.sockets is None or shape.cores_per_socket is None or shape.threads_per_core is None:
        return None
    expressions = [fleet.hosts] + [p.nodes for p in scheduler.partitions] + (
        [s.nodes for s in scheduler.topology.switches] if scheduler.topology else [])
    if size.max > MAX_HOSTS or any(e and host_count(e) > MAX_HOSTS for e in expressions):
        return None  # the size-range and slurm-partition-nodes rules say why
    if any(e and reversed_range(e) for e in expressions):
        return None  # the hostlist-range rule says where
    type_, features, cpus, memory, mem_spec = node_facts(fleet)
    aws = cloud == "aws"

    def node_line(names: str, elastic: bool) -> NodeLine:
        # on AWS every node is State=CLOUD: only the resume program starts an instance, and it
        # names it (static nodes too: SuspendExcNodes keeps them up once started)
        return NodeLine(names, cpus, shape.sockets, shape.cores_per_socket, shape.threads_per_core, memory, mem_spec,
                        f"gpu:{type_}:{shape.gpu_count}", features,
                        CLOUD_WEIGHT if elastic else STATIC_WEIGHT, "CLOUD" if elastic or aws else None)

    width = name_width(size.max)
    if fleet.hosts is not None:
        every = hostlist.expand_hostlist(fleet.hosts)
        everyone = hostlist.collect_hostlist(every)
        groups = [(everyone, False)]

        def leaf_nodes(first: int, last: int) -> str:  # 0-based, inclusive
            return hostlist.collect_hostlist(every[first:last + 1])
    else:
        everyone = node_names(fleet.name, 1, size.max, width)
        static = size.min if size.elastic else size.max
        groups = []
        if static:
            groups.append((node_names(fleet.name, 1, static, width), False))
        if size.max > static:
            groups.append((node_names(fleet.name, static + 1, size.max, width), True))

        def leaf_nodes(first: int, last: int) -> str:  # 0-based, inclusive; names are computed, not collected
            return node_names(fleet.name, first + 1, last + 1, width)
    nodes = tuple(node_line(names, elastic) for names, elastic in groups)
    static_nodes = next((names for names, elastic in groups if not elastic), None)
    elastic_nodes = next((names for names, elastic in groups if elastic), None)
    total = len(every) if fleet.hosts is not None else size.max
    devices = shape.gpu_count
    file = gpu_files(devices)
    gres = tuple(GresLine(line.names, type_, file, devices) for line in nodes)

    declared = scheduler.partitions or ()
    partitions = tuple(
        PartitionLine(p.name, hostlist.collect_hostlist(hostlist.expand_hostlist(p.nodes)) if p.nodes else everyone,
                      p.default or len(declared) == 1, _partition_time(p.max_time), p.priority_tier)
        for p in declared
    ) or (PartitionLine(fleet.name.replace("-", "_"), everyone, True, "UNLIMITED", None),)

    switches: tuple[SwitchLine, ...] = ()
    topology = scheduler.topology
    if aws:
        # EC2 does not place train-001 and train-002 under one switch because the blueprint says
        # so: topology.conf starts with one switch over every node (no placement claim) and the
        # controller's bin/topology rewrites it from DescribeInstanceTopology once nodes run
        switches = (SwitchLine("ec2", everyone, None),)
    elif topology is not None and topology.nodes_per_switch:
        step = topology.nodes_per_switch
        starts = range(0, total, step)
        digits = max(2, len(str(len(starts))))
        leaves = [SwitchLine(f"leaf{i + 1:0{digits}d}", leaf_nodes(start, min(start + step, total) - 1), None)
                  for i, start in enumerate(starts)]
        switches = tuple(leaves)
        if len(leaves) > 1:
            switches += (SwitchLine("spine", None, hostlist.collect_hostlist([s.name for s in leaves])),)
    elif topology is not None and topology.switches:
        leaves = [SwitchLine(s.name, hostlist.collect_hostlist(hostlist.expand_hostlist(s.nodes)), None)
                  for s in topology.switches]
        switches = tuple(leaves)
        if len(leaves) > 1:
            switches += (SwitchLine("spine", None, hostlist.collect_hostlist([s.name for s in leaves])),)

    version = scheduler.slurm_version or DEFAULT_SLURM_VERSION
    location = fleet.checkpoint.location if fleet.checkpoint is not None else None
    checkpoint_dir = posixpath.normpath(location) if location and location.startswith("/") else None
    ec2 = Ec2Nodes(f"{RENDERED_DIR}/{fleet.name}/slurm/bin", static_nodes, elastic_nodes,
                   node_generation(fleet), checkpoint_dir) if aws else None
    power = None
    parameters: tuple[str, ...] = ()
    if ec2 is not None or elastic_nodes is not None:
        bin_dir = ec2.program_dir if ec2 is not None else PROGRAM_DIR
        power = PowerSaving(f"{bin_dir}/resume", f"{bin_dir}/suspend", f"{bin_dir}/resume-fail", RESUME_TIMEOUT_S,
                            SUSPEND_TIME_S, SUSPEND_TIMEOUT_S, static_nodes, 0, 0)
        parameters = ("idle_on_node_suspend",)
    if ec2 is not None:
        # slurmctld learns a cloud node's address when it registers (the default from 23.11 on)
        parameters = (("cloud_reg_addrs",) if version_key(version) < version_key(REMOVED_IN["cloud_reg_addrs"])
                      else ()) + parameters + (f"power_save_min_interval={POWER_SAVE_MIN_INTERVAL_S}",
                                               f"node_reg_mem_percent={NODE_REG_MEM_PERCENT}")
    auth = scheduler.auth
    controller = scheduler.controller_host or f"{fleet.name}-controller"
    return SlurmConfig(
        cluster_name=scheduler.cluster_name or fleet.name.replace("-", "_"),
        controller_host=controller, version=version,
        auth_type=f"auth/{auth}", cred_type=f"cred/{auth}", gres_types=("gpu",),
        nodes=nodes, gres=gres, partitions=partitions, switches=switches, power=power, ec2=ec2,
        cgroup_automount=version_key(version) < version_key(REMOVED_IN["CgroupAutomount"]),
        private_data_cloud=power is not None and version_key(version) < version_key(REMOVED_IN["PrivateData=cloud"]),
        slurmctld_parameters=parameters, tree_width=CLOUD_TREE_WIDTH if ec2 is not None else None,
        all_nodes=everyone,
        def_cpu_per_gpu=gpu_defaults(fleet, cpus, memory, mem_spec)[0],
        def_mem_per_gpu_mib=gpu_defaults(fleet, cpus, memory, mem_spec)[1],
    )
