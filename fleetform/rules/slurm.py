"""Rules over Slurm schedulers: partitions, topology and controller."""

from __future__ import annotations

from ..model import Blueprint
from . import Reporter, rule


def _slurm_fleets(bp: Blueprint):
    return [f for f in bp.fleets if f.scheduler is not None and f.scheduler.type == "slurm"]


@rule("default-partition", "error", "exactly one Slurm partition is the default")
def default_partition(bp: Blueprint, report: Reporter) -> None:
    for fleet in _slurm_fleets(bp):
        parts = fleet.scheduler.partitions
        defaults = [p for p in parts if p.default]
        if len(parts) > 1 and not defaults:
            report(fleet.scheduler.path + ("partitions",), "no partition is the default",
                   f"mark one with `default: true`, e.g. '{parts[0].name}'")
        elif len(defaults) > 1:
            for extra in defaults[1:]:
                report(extra.path + ("default",), f"partition '{extra.name}' is a second default "
                       f"(after '{defaults[0].name}'); slurmctld would silently pick one", "keep one default partition")
        elif fleet.slurm is not None:  # the blueprint is right: the derived slurm.conf must be too
            rendered = [p.name for p in fleet.slurm.partitions if p.default]
            if len(rendered) != 1:
                report(fleet.scheduler.path, f"the rendered slurm.conf has {len(rendered)} default partitions "
                       f"({', '.join(rendered) or 'none'})", "exactly one partition must be the default")


@rule("slurm-topology", "error", "a Slurm topology gives nodes_per_switch or explicit switches, not both, "
      "and at most 1,024 leaf switches")
def slurm_topology(bp: Blueprint, report: Reporter) -> None:
    from ..slurm import MAX_HOSTS, MAX_LEAF_SWITCHES, host_count

    for fleet in _slurm_fleets(bp):
        topology = fleet.scheduler.topology
        if topology is None:
            continue
        if topology.nodes_per_switch is not None and topology.switches:
            report(topology.path, "topology gives both nodes_per_switch and switches",
                   "keep nodes_per_switch for evenly filled leaves, or switches to name each leaf's hosts")
        elif topology.nodes_per_switch is None and not topology.switches:
            report(topology.path, "topology is empty", "add nodes_per_switch: N, or switches")
        elif any(host_count(s.nodes) > MAX_HOSTS for s in topology.switches):
            report(topology.path + ("switches",), f"a switch names more than the {MAX_HOSTS:,} hosts fleetform expands",
                   "list the fleet's nodes under each switch")
        elif fleet.nodes is not None and topology.nodes_per_switch and topology.nodes_per_switch > fleet.nodes.max:
            report(topology.path + ("nodes_per_switch",),
                   f"{topology.nodes_per_switch} nodes per switch, but the fleet has at most "
                   f"{fleet.nodes.max} node{'s' if fleet.nodes.max != 1 else ''}",
                   "one switch holds the whole fleet: drop the topology, or lower nodes_per_switch")
        elif fleet.nodes is not None and topology.nodes_per_switch and \
                -(-fleet.nodes.max // topology.nodes_per_switch) > MAX_LEAF_SWITCHES:
            leaves = -(-fleet.nodes.max // topology.nodes_per_switch)
            report(topology.path + ("nodes_per_switch",),
                   f"{topology.nodes_per_switch} nodes per switch make {leaves:,} leaf switches, more than the "
                   f"{MAX_LEAF_SWITCHES:,} slurmctld starts with in seconds (its start grows with the square of the "
                   "switches)", f"use nodes_per_switch: {-(-fleet.nodes.max // MAX_LEAF_SWITCHES)} or more")


@rule("slurm-controller", "error", "an on-prem Slurm fleet names its controller host; an AWS one its instance type")
def slurm_controller(bp: Blueprint, report: Reporter) -> None:
    for fleet in _slurm_fleets(bp):
        scheduler = fleet.scheduler
        if bp.cloud == "onprem":
            if scheduler.controller_host is None:
                report(scheduler.path, f"on-prem Slurm fleet '{fleet.name}' names no controller host",
                       "add controller: {host: <slurmctld host>}")
            if scheduler.controller_instance_type is not None:
                report(scheduler.path + ("controller", "instance_type"), "instance_type applies to cloud: aws",
                       "on-prem: give controller.host")
        elif scheduler.controller_host is not None:
            report(scheduler.path + ("controller", "host"), "AWS fleets get a controller instance fleetform creates",
                   "remove host; set controller.instance_type")


@rule("slurm-version", "error", "the target Slurm release is one fleetform renders for and has the features asked for")
def slurm_version(bp: Blueprint, report: Reporter) -> None:
    from ..slurm import FEATURES_SINCE, SLURM_VERSIONS, version_key

    for fleet in _slurm_fleets(bp):
        scheduler = fleet.scheduler
        version = scheduler.slurm_version
        if version is not None and ".".join(version.split(".")[:2]) not in SLURM_VERSIONS:
            report(scheduler.path + ("slurm_version",), f"fleetform does not render for Slurm {version}",
                   f"use one of {', '.join(SLURM_VERSIONS)}")
            continue
        config = fleet.slurm
        if config is None:
            continue
        since = FEATURES_SINCE.get(config.auth_type)
        if since and version_key(config.version) < version_key(since):
            report(scheduler.path + ("auth",), f"{config.auth_type} needs Slurm {since} or later; the target is "
                   f"{config.version}", f"use auth: munge, or slurm_version: \"{since}\" or later")


@rule("hostlist-range", "error", "hostlist ranges run low to high (dgx-[01-06], not dgx-[06-01])")
def hostlist_range(bp: Blueprint, report: Reporter) -> None:
    """Slurm's hostlist parser refuses a range written high-low ("start > stop"), and so does the
    python-hostlist fleetform expands names with."""
    from ..slurm import host_count, reversed_range

    for fleet in bp.fleets:
        # hosts that name no host at all: the size-range rule says so
        expressions = [(fleet.path + ("hosts",), fleet.hosts)] if fleet.hosts and host_count(fleet.hosts) else []
        scheduler = fleet.scheduler
        if scheduler is not None and scheduler.type == "slurm":
            expressions += [(p.path + ("nodes",), p.nodes) for p in scheduler.partitions]
            if scheduler.topology is not None:
                expressions += [(s.path + ("nodes",), s.nodes) for s in scheduler.topology.switches]
        for path, expression in expressions:
            part = reversed_range(expression) if expression else None
            if part:
                low, _, high = part.partition("-")
                report(path, f"'{expression}' has the range {part}, high to low", f"write it low to high: {high}-{low}")


@rule("node-memory", "error", "a Slurm node keeps memory for jobs after MemSpecLimit: DefMemPerGPU is at least 1 MiB")
def node_memory(bp: Blueprint, report: Reporter) -> None:
    """RealMemory is 95% of memory_gib and MemSpecLimit keeps at least 2 GiB of it for the system
    (fleetform/slurm.py): on a node of about 2 GiB or less nothing is left, and slurmctld refuses the
    negative DefMemPerGPU of the job share divided among the GPUs ("Invalid DefMemPerGPU")."""
    from ..slurm import MEM_SPEC_MIN_MIB, MEMORY_SHARE

    for fleet in _slurm_fleets(bp):
        config = fleet.slurm
        if config is None or config.def_mem_per_gpu_mib >= 1:
            continue
        node = config.nodes[0]
        at = fleet.path + (("hardware", "memory_gib") if fleet.instance is None else ("instance_type",))
        least = int((MEM_SPEC_MIN_MIB + fleet.shape.gpu_count) / 1024 / MEMORY_SHARE) + 1
        report(at, f"{fleet.shape.memory_gib} GiB a node leaves no memory for jobs: RealMemory {node.real_memory_mib} "
               f"MiB minus MemSpecLimit {node.mem_spec_limit_mib} MiB for the system, over {fleet.shape.gpu_count} GPUs, "
               f"is DefMemPerGPU={config.def_mem_per_gpu_mib}, which slurmctld refuses",
               f"give the node's real memory: at least {least} GiB")


@rule("slurm-partition-nodes", "error", "a partition lists only nodes of its fleet")
def slurm_partition_nodes(bp: Blueprint, report: Reporter) -> None:
    from ..hostset import HostSet
    from ..slurm import MAX_HOSTS, host_count

    for fleet in _slurm_fleets(bp):
        for partition in fleet.scheduler.partitions:
            if partition.nodes is not None and host_count(partition.nodes) > MAX_HOSTS:
                report(partition.path + ("nodes",), f"partition '{partition.name}' names "
                       f"{host_count(partition.nodes):,} hosts, more than the {MAX_HOSTS:,} fleetform expands",
                       "list the fleet's nodes, or leave nodes out for all of them")
        if fleet.slurm is None:
            continue
        nodes = HostSet.parse(fleet.slurm.all_nodes)
        for partition in fleet.scheduler.partitions:
            if partition.nodes is None or host_count(partition.nodes) > MAX_HOSTS:
                continue
            unknown = HostSet.parse(partition.nodes) - nodes
            if unknown:
                report(partition.path + ("nodes",), f"partition '{partition.name}' lists "
                       f"{unknown}, not nodes of fleet '{fleet.name}' "
                       f"({fleet.slurm.all_nodes})", "list nodes of the fleet, or leave nodes out for all of them")


# What slurmctld accepts silently: these check the Slurm config fleetform derived for a fleet.

def _configs(bp: Blueprint):
    for fleet in _slurm_fleets(bp):
        if fleet.slurm is not None:
            yield fleet, fleet.slurm


@rule("slurm-gres-types", "error", "GresTypes declares every GRES a node line uses", stage="config")
def slurm_gres_types(bp: Blueprint, report: Reporter) -> None:
    for fleet, config in _configs(bp):
        for node in config.nodes:
            name = node.gres.split(":")[0]
            if name not in config.gres_types:
                report(fleet.scheduler.path, f"nodes {node.names} use Gres={node.gres}, but GresTypes does not "
                       f"declare '{name}'", "slurmctld would start and never schedule the GPUs; this is a "
                       "fleetform bug, please report it")


def _gres_count(node) -> tuple[str, int]:
    _, type_, count = node.gres.split(":")
    return type_, int(count)


@rule("slurm-gres-devices", "error", "gres.conf names as many GPU devices as the node's Gres count, with the same type", stage="config")
def slurm_gres_devices(bp: Blueprint, report: Reporter) -> None:
    from ..hostset import HostSet

    for fleet, config in _configs(bp):
        gres = [(line, HostSet.parse(line.names)) for line in config.gres]
        for node in config.nodes:
            type_, count = _gres_count(node)
            names = HostSet.parse(node.names)
            lines = [line for line, hosts in gres if names & hosts]
            if not lines:
                report(fleet.scheduler.path, f"gres.conf has no line for nodes {node.names}",
                       "every node with Gres needs its device files in gres.conf")
            for line in lines:
                if line.devices != count:
                    report(fleet.scheduler.path, f"gres.conf gives {line.names} {line.devices} GPU device files "
                           f"({line.file}) but slurm.conf says Gres=gpu:{type_}:{count}",
                           "slurmd would register fewer GPUs than jobs are promised")
                if line.type != type_:
                    report(fleet.scheduler.path, f"gres.conf types the GPUs of {line.names} '{line.type}' but "
                           f"slurm.conf says '{type_}'", "jobs asking for --gres=gpu:<type> would never start")


@rule("slurm-cpus", "error", "a node's CPUs equal Sockets x CoresPerSocket x ThreadsPerCore", stage="config")
def slurm_cpus(bp: Blueprint, report: Reporter) -> None:
    for fleet, config in _configs(bp):
        for node in config.nodes:
            product = node.sockets * node.cores_per_socket * node.threads_per_core
            if node.cpus != product:
                report(fleet.scheduler.path, f"nodes {node.names} have CPUs={node.cpus} but "
                       f"{node.sockets} x {node.cores_per_socket} x {node.threads_per_core} = {product}",
                       "slurmctld accepts it and then schedules cores that do not exist")


@rule("slurm-topology-cover", "error", "topology.conf places every node under exactly one leaf switch", stage="config")
def slurm_topology_cover(bp: Blueprint, report: Reporter) -> None:
    from ..hostset import HostSet, overlaps

    for fleet, config in _configs(bp):
        if not config.switches:
            continue
        nodes = HostSet.parse(config.all_nodes)
        leaves = [HostSet.parse(s.nodes) for s in config.switches if s.nodes]
        covered = HostSet.of(*leaves)
        path = fleet.scheduler.topology.path if fleet.scheduler.topology else fleet.scheduler.path
        missing, twice, unknown = nodes - covered, overlaps(leaves), covered - nodes
        if missing:
            report(path, f"no switch holds {missing}",
                   "jobs on those nodes get no topology-aware placement; list them under a switch")
        if twice:
            report(path, f"{twice} sit under more than one switch",
                   "a node hangs off one leaf switch; list it once")
        if unknown:
            report(path, f"switches list {unknown}, which are not nodes of the fleet",
                   f"the fleet's nodes are {config.all_nodes}")
