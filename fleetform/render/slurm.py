"""<fleet>/slurm/: slurm.conf, gres.conf, cgroup.conf, topology.conf and, for AWS fleets, the
programs in bin/ that boot the controller and the nodes and start and stop instances
(docs/aws-training.md)."""

from __future__ import annotations

from importlib import resources

from ..acceptance import ALL_REDUCE_PERF
from ..model import Blueprint, Fleet
from .jinja import render

PROGRAMS = ("fleetform_node.py", "fleetform_dns.py", "bootstrap", "resume", "suspend", "resume-fail", "keeper",
            "topology", "task-prolog", "imds-access", "update", "prolog", "epilog", "fleetform_jobcheck.py")
"""templates/slurm/bin/: Python 3 programs with no render-time values in them (those are in
bin/fleet.json), copied as they are."""
ACCEPTANCE_MPI = "pmix"
"""srun --mpi: nccl-tests built with MPI (MPI=1, as AWS's Deep Learning AMI and awsome-distributed-training
build it) takes its ranks from PMIx under srun."""
ACCEPTANCE_FILES = ("acceptance",)
"""Every Slurm training fleet's acceptance job (fleetform/acceptance.py): the program, copied as it is; its
values are in bin/acceptance.json, its allocation in bin/acceptance.sbatch."""
POOL_PROGRAMS = ("pool-edge",)
"""A training fleet that lends nodes to a pool (fleetform/pool.py): the program the keeper runs, copied as it is;
its values are in bin/pool.json."""
MONITORING_PROGRAMS = ("monitoring-targets", "fleetform_monitoring.py")
"""templates/slurm/bin/: what the bootstrap installs for monitoring and the controller's file_sd writer
(fleetform/monitoring.py); their values are in bin/monitoring.json, Prometheus' in monitoring/prometheus.yml."""
JOB_CHECK_PROGRAMS = ("prolog", "epilog", "fleetform_jobcheck.py")
"""An on-prem fleet's Prolog and Epilog when they check the node (health.json `prolog`): the same programs as an
AWS fleet's, which leave out pinning the job's files where there is no bin/update and no bin/fleet.json."""
HEALTH_FILES = ("health", "xid.json")
"""Every Slurm training fleet's node health check (fleetform/health.py), on-prem too: the program
and NVIDIA's Xid table it reads, copied as they are; its values are in bin/health.json."""


def _program(name: str) -> bytes:
    return (resources.files("fleetform.templates") / "slurm" / "bin" / name).read_bytes()


def files(bp: Blueprint, fleet: Fleet) -> dict[str, bytes]:
    config = fleet.slurm
    if config is None:
        return {}
    common = {"fleet": fleet.name, "blueprint": bp.name, "version": bp.version, "c": config, "h": fleet.health,
              "a": fleet.accounting}
    base = f"{fleet.name}/slurm"
    out = {
        f"{base}/slurm.conf": render("slurm/slurm.conf.j2", **common),
        f"{base}/gres.conf": render("slurm/gres.conf.j2", **common),
        f"{base}/cgroup.conf": render("slurm/cgroup.conf.j2", **common),
    }
    if config.switches:
        out[f"{base}/topology.conf"] = render("slurm/topology.conf.j2", **common)
    if fleet.accounting is not None:
        out[f"{base}/slurmdbd.conf"] = render("slurm/slurmdbd.conf.j2", **common)
        out[f"{base}/accounts.cfg"] = render("slurm/accounts.cfg.j2", **common)
    if fleet.health is not None:
        out[f"{base}/bin/health.json"] = render("slurm/health.json.j2", **common)
        out.update({f"{base}/bin/{name}": _program(name) for name in HEALTH_FILES})
        if fleet.health.job_programs:  # on-prem: AWS fleets get them with PROGRAMS
            out.update({f"{base}/bin/{name}": _program(name) for name in JOB_CHECK_PROGRAMS})
    if fleet.acceptance is not None:
        accept = dict(common, a=fleet.acceptance, all_reduce_perf=ALL_REDUCE_PERF, mpi=ACCEPTANCE_MPI)
        out.update({f"{base}/bin/{name}": _program(name) for name in ACCEPTANCE_FILES})
        out[f"{base}/bin/acceptance.json"] = render("slurm/acceptance.json.j2", **accept)
        out[f"{base}/bin/acceptance.sbatch"] = render("slurm/acceptance.sbatch.j2", **accept)
    if config.ec2 is not None:
        out[f"{base}/bin/fleet.json"] = render("slurm/fleet.json.j2", **common)
        out.update({f"{base}/bin/{name}": _program(name) for name in PROGRAMS})
        if fleet.monitoring is not None:
            out[f"{base}/bin/monitoring.json"] = render("monitoring/monitoring.json.j2", m=fleet.monitoring, **common)
            out[f"{base}/monitoring/prometheus.yml"] = render("monitoring/prometheus.yml.j2", m=fleet.monitoring,
                                                              **common)
            out.update({f"{base}/bin/{name}": _program(name) for name in MONITORING_PROGRAMS})
        if fleet.login is not None:  # the users every machine's bootstrap creates (fleetform/login.py)
            out[f"{base}/bin/users.json"] = render("slurm/users.json.j2", u=fleet.login, **common)
    if config.ec2 is None and fleet.monitoring is not None:  # on-prem: the site's Prometheus reads these two
        out[f"{base}/monitoring/prometheus.yml"] = render("monitoring/prometheus.yml.j2", m=fleet.monitoring, **common)
        out[f"{base}/monitoring/nodes.json"] = render("monitoring/nodes.json.j2", m=fleet.monitoring, **common)
    if config.ec2 is not None and fleet.pool_edge is not None:
        out[f"{base}/bin/pool.json"] = render("slurm/pool.json.j2", e=fleet.pool_edge)
        out.update({f"{base}/bin/{name}": _program(name) for name in POOL_PROGRAMS})
    return out
