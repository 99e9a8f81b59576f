"""The node health check of a Slurm training fleet, as data: what `bin/health` checks on every node,
how often slurmd runs it, and what a failure does. Everything the rendered slurm.conf lines and
bin/health.json print is computed here from the resolved fleet (templates compute nothing).

slurmd runs HealthCheckProgram as root on every node that is not NOT_RESPONDING, every
HealthCheckInterval seconds on nodes in the HealthCheckNodeState states, and kills it when it has
not ended within 60 seconds; any action is the program's own ("scontrol update NodeName=foo
State=drain Reason=..."): slurm.conf(5) of Slurm 22.05, HealthCheckProgram and HealthCheckNodeState.

A later slice (Kubernetes node agent, acceptance jobs) builds on the same record: the checks and
their expected values do not depend on the scheduler.
"""

from __future__ import annotations

import posixpath
from typing import Literal

from .records import frozen
from .slurm import PROGRAM_DIR, RENDERED_DIR

SUITES: dict[str, tuple[str, ...]] = {
    "light": ("gpus", "xid", "mounts"),
    "standard": ("gpus", "xid", "mounts", "efa", "nvlink"),
    "thorough": ("gpus", "xid", "mounts", "efa", "nvlink", "dcgm"),
}
"""The checks of each suite, light to thorough. `efa` and `nvlink` run only where the instance has
EFA devices or NVSwitch (HealthConfig.checks drops them elsewhere)."""

TIMEOUT_S: dict[str, int] = {"gpus": 8, "xid": 5, "efa": 5, "nvlink": 5, "fabric": 3, "dcgm": 25, "mount": 2,
                             "probe": 2, "scontrol": 2}
"""What bin/health gives each command before it counts as failed (it kills it then): fleetform's
budgets, chosen so that the thorough suite on an NVSwitch host with one file system (55 s) and the
two scontrol calls of a drain (4 s) end within slurmd's 60 s. `mount` is findmnt's, `probe` the
write probe's (a child process: a hung Lustre mount blocks the writer, not the check), `scontrol`
each call to slurmctld (`show node`, then the drain and what on_failure adds). A suite's worst case is their sum: `dcgmi diag -r 1` is DCGM's quick level, "normally lasting seconds" (DCGM
dcgmi-diag reference, https://docs.nvidia.com/datacenter/dcgm/latest/reference/command-line-reference/dcgmi/dcgmi-diag.html);
levels 2 (about two minutes) and 3 (about 15 minutes) cannot run inside slurmd's 60 s."""

JOB_TIMEOUT_S: dict[str, int] = {"gpus": 4, "xid": 2, "apps": 3, "scontrol": 2}
"""bin/prolog's and bin/epilog's budgets (fleetform_jobcheck.py), tighter than bin/health's: the Prolog
holds the job's start, and slurm.conf(5) of 22.05 (Prolog) expects it to "complete execution quickly
(in less time than MessageTimeout)", 10 s by default. gpus 4 + xid 2 + the drain's scontrol 2 = 8 s."""
PROLOG_CHECKS = ("gpus", "xid")
EPILOG_CHECKS = ("apps", "xid")
"""The light checks at a job's edges: before it every GPU present and clean and no new fatal Xid; after
it no compute process left on a GPU (a process that outlives its job holds GPU memory the next job
needs) and no new fatal Xid."""
EPILOG_SETTLE_S = 5
"""How long bin/epilog waits for the job's GPU processes to go before it counts one as left over."""
DEFAULT_PROLOG = True

SCONTROL_CALLS: dict[str, int] = {"drain": 2, "reboot": 3, "replace": 4}
"""The scontrol calls bin/health makes on a failure, `show node` included: drain (show, drain),
reboot (and `scontrol reboot`), replace (and state=down, state=undrain). Each counts in the 60 s."""

REBOOT_LIMIT = 3
REBOOT_WINDOW_S = 24 * 3600
"""on_failure: reboot asks Slurm for at most REBOOT_LIMIT reboots of a node within REBOOT_WINDOW_S
(one per boot, kept by boot id in health-reboots.json); a node that still fails after them stays
drained with `N reboots: <reason>`, for a person: rebooting it again would loop forever."""

SLURMD_KILL_S = 60
"""slurmd kills a HealthCheckProgram that has not ended within 60 seconds (slurm.conf(5), 22.05)."""

DEFAULT_SUITE = "standard"
DEFAULT_INTERVAL_S = 300
DEFAULT_NODE_STATE = ("any",)
DEFAULT_ON_FAILURE = "drain"

REASON_PREFIX = "fleetform-health: "
"""Every drain reason bin/health sets starts with it, and it resumes only nodes whose reason does:
a drain a person set is never undone. `sinfo -R` prints the first 20 characters of a reason
(sinfo(1), --list-reasons: "%20E %9u %19H %N"); `sinfo -R -o '%60E %N'` prints all of ours."""
REASON_MAX = 60
"""bin/health keeps each reason within 60 characters, prefix included, so one `sinfo -R -o '%60E %N'`
line shows it whole."""

REBOOT_PROGRAM = "/usr/sbin/reboot"
"""on_failure: reboot: Slurm reboots a node through RebootProgram (`scontrol reboot ASAP
nextstate=RESUME`, scontrol(1)); without one slurmctld refuses the request."""

NVSWITCH = "NVSwitch"
"""Instances whose catalog interconnect names NVSwitch (p4d, p4de, p5, p5e, p5en, p6) run NVIDIA's
fabric manager, without which their GPUs cannot reach each other (providers/aws/instances.json,
gpu_interconnect)."""

STATE_DIR = "/var/lib/fleetform"

SPREAD_NODES = 32
SPREAD_MAX_S = 10
"""A fleet of more than SPREAD_NODES nodes spreads its checks' calls to slurmctld over up to
SPREAD_MAX_S seconds (each node waits a fixed offset from its name's hash before `scontrol show
node`), as far as the suite leaves room within slurmd's 60 s. slurmctld starts the check on every
node at once unless HealthCheckNodeState has CYCLE (slurm.conf(5): "the HealthCheckProgram will be
executed at the same time on all nodes to minimize its impact upon parallel programs"; CYCLE
instead "cycle[s] through running on all compute nodes through the course of the
HealthCheckInterval"). fleetform keeps that default rather than CYCLE: a training job spanning N
nodes waits for its slowest rank, so checks at one moment stall it once an interval, cycled checks up
to N times. What must not arrive at once is hundreds of `scontrol show node`, each given 2 s; the
checks themselves still run together. 32 is fleetform's choice (not measured against a slurmctld at
that scale): smaller fleets make as few calls as a single job's srun does."""


@frozen
class HealthConfig:
    suite: Literal["light", "standard", "thorough"]
    checks: tuple[str, ...]  # the suite's checks that apply to this fleet's nodes
    interval_s: int  # HealthCheckInterval
    node_state: tuple[str, ...]  # HealthCheckNodeState values, upper case
    on_failure: Literal["drain", "reboot", "replace"]
    program: str  # HealthCheckProgram: bin/health on the nodes
    gpus: int  # GPUs each node must show, all healthy
    efa: int  # EFA devices fi_info must list (0: the check does not run)
    nvswitch: bool  # NVLink links and the fabric manager are checked
    mounts: tuple[str, ...]  # folders that must be mounted and writable
    worst_case_s: int  # the longest a check can take: the sum of its commands' timeouts
    spread_s: int  # seconds over which the fleet's nodes spread their calls to slurmctld (0: none)
    aws: bool
    path: tuple  # where the blueprint sets it (the fleet's `health`, or the fleet when defaulted)
    declared: bool  # written in the blueprint, not defaulted
    prolog: bool = DEFAULT_PROLOG  # bin/prolog and bin/epilog run their job checks (fleetform_jobcheck.py)

    @property
    def job_programs(self) -> tuple[str, str] | None:
        """An on-prem fleet's Prolog= and Epilog= (bin/prolog and bin/epilog beside bin/health, where the site
        installs the fleet's bin/), when they check the node; an AWS fleet's slurm.conf names its own pair,
        which also pin the job's nccl.env (SlurmConfig.ec2)."""
        if self.aws or not self.prolog:
            return None
        folder = self.program.rsplit("/", 1)[0]
        return f"{folder}/prolog", f"{folder}/epilog"

    @property
    def prolog_checks(self) -> tuple[str, ...]:
        return PROLOG_CHECKS

    @property
    def epilog_checks(self) -> tuple[str, ...]:
        return EPILOG_CHECKS

    @property
    def job_timeouts(self) -> tuple[tuple[str, int], ...]:
        return tuple(sorted(JOB_TIMEOUT_S.items()))

    @property
    def epilog_settle_s(self) -> int:
        return EPILOG_SETTLE_S

    @property
    def reboot_program(self) -> str | None:
        return REBOOT_PROGRAM if self.on_failure == "reboot" else None

    @property
    def state_file(self) -> str:
        """Where bin/health keeps the kernel journal's cursor: each check reads the Xid lines since the last."""
        return f"{STATE_DIR}/health-journal.cursor"

    @property
    def timeouts(self) -> tuple[tuple[str, int], ...]:
        return tuple(sorted(TIMEOUT_S.items()))

    @property
    def reboot_limit(self) -> int:
        return REBOOT_LIMIT

    @property
    def reboot_window_s(self) -> int:
        return REBOOT_WINDOW_S

    @property
    def reason_prefix(self) -> str:
        return REASON_PREFIX

    @property
    def reason_max(self) -> int:
        return REASON_MAX


def worst_case(checks: tuple[str, ...], nvswitch: bool, mounts: int, on_failure: str = DEFAULT_ON_FAILURE) -> int:
    """The longest bin/health can run: its checks' timeouts and the scontrol calls of a failure."""
    total = TIMEOUT_S["scontrol"] * SCONTROL_CALLS[on_failure]
    for check in checks:
        if check == "mounts":
            total += (TIMEOUT_S["mount"] + TIMEOUT_S["probe"]) * mounts
        elif check == "nvlink":
            total += TIMEOUT_S["nvlink"] + (TIMEOUT_S["fabric"] if nvswitch else 0)
        else:
            total += TIMEOUT_S[check]
    return total


def spread(nodes: int, worst_case_s: int) -> int:
    """SPREAD_MAX_S for a fleet above SPREAD_NODES nodes, less what the suite's worst case leaves of
    slurmd's 60 s (the spread adds to every check's time)."""
    if nodes <= SPREAD_NODES:
        return 0
    return max(0, min(SPREAD_MAX_S, SLURMD_KILL_S - worst_case_s))


def build(fleet, data: dict | None, storage, cloud: str) -> HealthConfig | None:
    """The health check of a training fleet scheduled by Slurm whose node shape is known; None
    otherwise (its Slurm config is None then too, and rules say why)."""
    if fleet.slurm is None or fleet.shape is None:
        return None
    data = data or {}
    suite = data.get("suite", DEFAULT_SUITE)
    instance = fleet.instance
    efa = instance.max_efa if instance is not None and fleet.interconnect is not None \
        and fleet.interconnect.fabric == "efa" else 0
    nvswitch = instance is not None and NVSWITCH in instance.gpu_interconnect
    checks = tuple(c for c in SUITES[suite] if (c != "efa" or efa) and (c != "nvlink" or nvswitch))
    attached = [s.mount_path for name in fleet.storage for s in storage
                if s.name == name and s.type == "fsx-lustre" and s.mount_path]
    mounts = tuple(dict.fromkeys(posixpath.normpath(m) for m in attached + list(data.get("mounts", ()))))
    if not mounts:
        checks = tuple(c for c in checks if c != "mounts")
    aws = cloud == "aws"
    on_failure = data.get("on_failure", DEFAULT_ON_FAILURE)
    program_dir = f"{RENDERED_DIR}/{fleet.name}/slurm/bin" if aws else PROGRAM_DIR
    worst = worst_case(checks, nvswitch, len(mounts), on_failure)
    return HealthConfig(
        suite=suite, checks=checks, interval_s=data.get("interval_s", DEFAULT_INTERVAL_S),
        node_state=tuple(s.upper() for s in data.get("node_state", DEFAULT_NODE_STATE)),
        on_failure=on_failure, program=f"{program_dir}/health",
        gpus=fleet.shape.gpu_count, efa=efa, nvswitch=nvswitch, mounts=mounts,
        worst_case_s=worst, spread_s=spread(fleet.nodes.max if fleet.nodes is not None else 0, worst), aws=aws,
        path=fleet.path + ("health",) if data else fleet.path,
        declared=bool(data), prolog=data.get("prolog", DEFAULT_PROLOG),
    )


# --- Kubernetes fleets (EKS) -------------------------------------------------------------------------
# An inference fleet's GPU nodes on EKS are checked by AWS's EKS node monitoring agent (an EKS add-on:
# providers/aws/addons.yaml) and repaired by EKS node auto repair on their managed node group
# (providers/aws/kube.py node_repair_config). docs/health.md says why these rather than Node Problem
# Detector with bin/health as a custom plugin: the agent reads the same signals bin/health reads (the
# kernel log's NVIDIA Xids, DCGM health, the fabric manager on NVSwitch instances, EFA) and sets the
# AcceleratedHardwareReady NodeCondition, and auto repair acts on it (reboot or replace, 10 minutes
# after the condition turns false), where NPD only sets a condition and a further remedy system
# (Draino, a custom controller) must cordon, drain and replace the node.

DEFAULT_AUTO_REPAIR = True
"""An inference fleet's GPU node group on AWS gets node auto repair unless its `health: {auto_repair:
false}` says otherwise (EKS User Guide, "Automatically repair nodes in EKS clusters": managed node
groups support Reboot and Replace). `fleetform plan` names it per node group, and `fleetform diff`
calls turning it on a change a reviewer reads: from then on EKS reboots or replaces serving nodes by
itself. `false` is sent as `enabled: false`, not as a missing block: the EKS API's NodeRepairConfig
is optional, and a provider leaves what the node group has when the block is absent."""

KUBE_REPAIR_MAX_PARALLEL = 1
"""maxParallelNodesRepairedCount on each GPU node group: EKS repairs one unhealthy node of the group at
a time (EKS API NodeRepairConfig: "the maximum number of nodes that can be repaired concurrently or in
parallel, expressed as a count of unhealthy nodes", minimum 1; pulumi-aws 7.51
NodeGroupNodeRepairConfigArgs.max_parallel_nodes_repaired_count). A bad AMI or driver that turns every
node's GPUs unhealthy at once then costs the fleet one node at a time, not all of it: an inference
fleet's groups are often small (1-5 nodes), where a percentage threshold of unhealthy nodes rounds to
nothing."""

KUBE_SCOPE_KEYS = ("auto_repair",)
"""The keys of a fleet's `health` block that apply to an inference fleet (the health-scope rule refuses
the others there: they configure bin/health, which only Slurm runs); Slurm fleets may not set them."""

KUBE_REPAIR_OVERRIDES: tuple[tuple[str, str, str, int], ...] = (
    ("AcceleratedHardwareReady", "DCGMError", "NoAction", 10),
)
"""Node auto repair's exceptions (EKS API NodeRepairConfigOverrides: condition, reason, action of
Replace | Reboot | NoAction, minutes). DCGMError is "Connection to the DCGM host process was lost or
could not be established" (aws/eks-node-monitoring-agent v1.7.0 pkg/reasons/reasons.yaml), a fault
of the monitoring, not of the GPU: with another DCGM on the node (the GPU Operator's dcgm-exporter)
users saw AcceleratedHardwareReady=False on healthy nodes and had them terminated
(aws/containers-roadmap#2763). Xid, DCGM health and diagnostic reasons keep EKS's default action."""
