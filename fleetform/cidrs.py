"""Whether CIDR ranges together cover the whole IPv4 Internet, and the words of that finding (eks-api-open):
shared by the rule (fleetform/rules/cluster.py), the plan check (fleetform/policies.py), the Pulumi program
(providers/aws/kube.py) and the stack (stacks/__main__.py). No rule module is imported here, so importing it
never registers rules out of order."""

from __future__ import annotations

import ipaddress


def covers_internet(cidrs) -> bool:
    """Whether the CIDR blocks together cover the whole IPv4 Internet, however they are split
    (0.0.0.0/1 + 128.0.0.0/1, or 1.2.3.4/0 with host bits set). The plan check eks-api-open and the
    stack's fleetform:deployer-cidr (stacks/__main__.py, providers/aws/kube.py api_access) ask the same."""
    networks = [ipaddress.ip_network(c, strict=False) for c in cidrs]
    merged = list(ipaddress.collapse_addresses(n for n in networks if n.version == 4))
    return any(n.prefixlen == 0 for n in merged)


def api_open_message(what: str) -> str:
    """The eks-api-open finding's words, for the blueprint's api_access_cidrs and the stack's deployer-cidr."""
    return f"{what} together admit the whole Internet to the cluster's API endpoint"
