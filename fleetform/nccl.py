"""NCCL: the environment a training fleet's nccl.env sets, chosen by fabric, and NCCL's own list
of variables (providers/nccl-variables.tsv) that the blueprint's nccl.env entries are linted against.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources

from .model import EnvVar
from .records import frozen

PLUGIN_PREFIXES = ("FI_", "OFI_NCCL_")
"""Variables of libfabric and the aws-ofi-nccl plugin: meaningful with EFA only."""


@frozen
class Variable:
    name: str
    since: str
    status: str  # ok | warn | experimental | deprecated(...) | removed(...) | undocumented | obsolete
    note: str

    @property
    def replacement(self) -> str | None:
        match = re.search(r"->(\S+)|alias of (\S+)", self.status)
        return (match.group(1) or match.group(2)) if match else None


@lru_cache(maxsize=1)
def variables() -> dict[str, Variable]:
    text = resources.files("fleetform.providers").joinpath("nccl-variables.tsv").read_text(encoding="utf-8")
    table: dict[str, Variable] = {}
    for line in text.splitlines():
        if not line or line.startswith("#") or line.startswith("name\t"):
            continue
        name, _section, since, _default, status, *note = line.split("\t")
        table[name] = Variable(name, since, status, note[0] if note else "")
    return table


def environment(fleet) -> tuple[EnvVar, ...]:
    """What nccl.env sets for a training fleet, each variable with the reason it is there."""
    net = fleet.interconnect
    fabric = net.fabric if net is not None else "tcp"
    settings = fleet.nccl
    out: list[EnvVar] = []
    debug = settings.debug if settings is not None and settings.debug else None
    out.append(EnvVar("NCCL_DEBUG", debug or "WARN",
                      "from the blueprint's nccl.debug" if debug else
                      "report problems (WARN) without flooding every rank's log"))
    if fabric in ("infiniband", "roce") and net.hcas:
        out.append(EnvVar("NCCL_IB_HCA", "=" + ",".join(net.hcas),
                          "only these HCA ports; the leading '=' matches exact names (mlx5_1 must not also "
                          "select mlx5_10)"))
    if fabric == "roce":
        if net.gid_index is not None:
            out.append(EnvVar("NCCL_IB_GID_INDEX", str(net.gid_index), "the RoCE v2 GID of the HCAs"))
        if net.traffic_class is not None:
            out.append(EnvVar("NCCL_IB_TC", str(net.traffic_class),
                              "traffic class of the lossless (PFC) priority the switches reserve for RDMA"))
    if fabric == "tcp":
        out.append(EnvVar("NCCL_IB_DISABLE", "1", "no RDMA fabric: do not probe InfiniBand verbs devices"))
    if net is not None and net.socket_ifname:
        out.append(EnvVar("NCCL_SOCKET_IFNAME", "=" + net.socket_ifname,
                          "bootstrap and socket traffic on this interface, matched by exact name"))
    if settings is not None:
        for name, value in sorted(settings.env.items()):
            previous = next((v for v in out if v.name == name), None)
            why = "set in the blueprint's nccl.env"
            if previous is not None:
                out.remove(previous)
                why += f", replacing fleetform's {previous.value}"
            out.append(EnvVar(name, value, why))
    return tuple(out)


def fabric_note(fleet) -> tuple[str, ...]:
    """The header comment lines of a fleet's nccl.env: how NCCL reaches the other nodes."""
    net = fleet.interconnect
    fabric = net.fabric if net is not None else "tcp"
    return {
        "efa": ("EFA through the aws-ofi-nccl plugin, which picks the EFA devices and tunes NCCL",
                "per instance type itself: current versions need no FI_* or NCCL_* transport variables."),
        "infiniband": ("InfiniBand: NCCL's IB verbs transport on the listed HCA ports.",),
        "roce": ("RoCE: NCCL's IB verbs transport over Ethernet, on the listed HCA ports.",),
        "tcp": ("plain TCP sockets: no RDMA fabric between the nodes.",),
    }[fabric]
