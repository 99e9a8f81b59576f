"""Where `pulumi up` runs from: the public IPv4 address the EKS API endpoint must answer when the
blueprint lists no provider.eks.api_access_cidrs (the run's own Kubernetes provider talks to the cluster
it has just made, from outside its VPC).

Looked up at `pulumi up` only (never by validate, render or plan) from AWS's own address echo,
https://checkip.amazonaws.com, which the EC2 User Guide names for finding "the public IPv4 address of
your local computer" ("Rules to add to your security group" / "Connect to your Linux instance").
"""

from __future__ import annotations

import http.client
import ipaddress
import urllib.request

CHECKIP_URL = "https://checkip.amazonaws.com"


def deployer_cidr(url: str = CHECKIP_URL, timeout: float = 10.0) -> str:
    """The caller's public IPv4 address as a /32; ValueError when the answer is not one public address,
    OSError when nothing answers (fleetform/pulumi_program.py turns both into one line)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (a fixed https URL, or a test's)
            text = response.read(64).decode("ascii", "replace").strip()
    except http.client.HTTPException as err:
        # no HTTP answer (a captive portal or a proxy that speaks something else): not an OSError, and it
        # reached `pulumi up` as a traceback
        raise ValueError(f"{url} gave no HTTP answer ({type(err).__name__})") from None
    try:
        address = ipaddress.IPv4Address(text)
    except ValueError:
        raise ValueError(f"{url} answered {text[:40]!r}, not an IPv4 address") from None
    if not address.is_global:
        raise ValueError(f"{url} answered {address}, which is not a public address")
    return f"{address}/32"
