"""Rules over the blueprint's nccl.env entries, linted against NCCL's documented variables."""

from __future__ import annotations

from ..model import Blueprint
from ..nccl import PLUGIN_PREFIXES, variables
from . import Reporter, did_you_mean, rule

NOT_NCCL = {
    "NCCL_TIMEOUT": ("NCCL_TIMEOUT is not an NCCL variable: NCCL has no collective timeout of its own",
                     "set the timeout in the framework, e.g. torch.distributed.init_process_group(timeout=...); "
                     "NCCL_IB_TIMEOUT is something else, the InfiniBand retry timeout exponent (0-31)"),
}


def _entries(bp: Blueprint) -> list[tuple]:
    """Every nccl.env entry of the training fleets: (fleet, name, value, path)."""
    return [(fleet, name, value, fleet.nccl.path + ("env", name))
            for fleet in bp.fleets if fleet.training and fleet.nccl is not None
            for name, value in fleet.nccl.env.items()]


@rule("nccl-env", "error", "nccl.env names variables NCCL (or, with EFA, its network plugin) reads")
def nccl_env(bp: Blueprint, report: Reporter) -> None:
    entries = _entries(bp)
    table = variables() if entries else {}  # NCCL's list is read (0.5 ms) only when nccl.env sets variables
    for fleet, name, _value, path in entries:
        fabric = fleet.interconnect.fabric if fleet.interconnect else None
        if name in NOT_NCCL:
            message, hint = NOT_NCCL[name]
            report(path, message, hint, key=True)
        elif name.startswith(PLUGIN_PREFIXES):
            if fabric != "efa":
                report(path, f"{name} configures libfabric or the aws-ofi-nccl plugin, which only EFA uses; "
                       f"this fleet's fabric is {fabric or 'unknown'}", "remove it", key=True)
        elif not name.startswith("NCCL_"):
            report(path, f"{name} is not an NCCL variable", "nccl.env holds NCCL_* (and, with EFA, FI_* and "
                   "OFI_NCCL_*) variables; set other variables in the job's environment", key=True)
        elif name not in table:
            report(path, f"NCCL does not know {name}", did_you_mean(name, table, "see NCCL's environment variables"),
                   key=True)
        else:
            var = table[name]
            if var.status.startswith(("deprecated", "removed")):
                verb = "was removed" if var.status.startswith("removed") else "is deprecated"
                version = var.status.split("(")[1].split(")")[0] if "(" in var.status else ""
                replacement = var.replacement
                report(path, f"{name} {verb}{' in NCCL ' + version if version else ''}",
                       f"use {replacement}" if replacement else "remove it: current NCCL ignores it", key=True)


@rule("nccl-env-risky", "warning", "nccl.env avoids NCCL variables that are risky, undocumented, obsolete or ignored on this fabric")
def nccl_env_risky(bp: Blueprint, report: Reporter) -> None:
    entries = _entries(bp)
    table = variables() if entries else {}
    for fleet, name, value, path in entries:
        var = table.get(name)
        if var is None:
            continue
        fabric = fleet.interconnect.fabric if fleet.interconnect else None
        if name == "NCCL_DEBUG":
            report(path, "NCCL_DEBUG belongs in nccl.debug", f"write `nccl: {{debug: {value}}}`; INFO and TRACE log "
                   "every rank's setup, keep them for debugging", key=True)
        elif var.status == "warn":
            detail = f" ({var.note})" if var.note else ""
            report(path, f"{name} overrides what NCCL picks itself and is meant for debugging{detail}",
                   "set it for one experiment, not for every job of the fleet", key=True)
        elif var.status == "obsolete":
            report(path, f"{name} is obsolete with current aws-ofi-nccl and libfabric: {var.note}",
                   "remove it (aws-ofi-nccl doc/efa-env-var.md); current versions tune EFA per instance themselves",
                   key=True)
        elif var.status in ("undocumented", "experimental"):
            report(path, f"{name} is {var.status} in NCCL: it may change or vanish without notice",
                   "prefer a documented variable", key=True)
        if name.startswith("NCCL_IB_") and fabric == "efa":
            report(path, f"{name} configures NCCL's InfiniBand transport, which EFA does not use",
                   "on EFA, NCCL talks to the network through the aws-ofi-nccl plugin: remove it", key=True)
        elif name == "NCCL_IB_HCA" and not value.startswith(("=", "^=")):
            report(path, f"NCCL_IB_HCA={value} matches names by prefix (mlx5_1 also selects mlx5_10, mlx5_11)",
                   f"write ={value} to select exactly these HCAs", key=True)
