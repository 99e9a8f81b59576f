"""The EKS cluster's Kubernetes version against EKS's release calendar (providers/aws/eks-versions.tsv,
with its sources): a version past its end of standard support costs extended support per cluster hour
(a warning); one past its end of extended support cannot be created any more, and one the calendar does
not list is not known to be offered (errors).

Dates are compared with the day of the run in UTC; FLEETFORM_TODAY=YYYY-MM-DD sets it (tests pin it, as
the keeper's tests pin FLEETFORM_NOW).
"""

from __future__ import annotations

from ..eks_versions import CALENDAR_SOURCE, EXTENDED_PRICE, calendar, in_standard_support, out_of_date_hint, today
from ..model import Blueprint
from . import Reporter, rule


def _eks_fleets(bp: Blueprint):
    cluster = bp.cluster
    if cluster is None:
        return []
    # by the scheduler, not the name alone: a training fleet may share a serving fleet's name (unique-names
    # reports it, and this rule must not crash on it)
    return [f for f in bp.fleets if f.name in cluster.fleets
            and getattr(f.scheduler, "type", None) in ("kubernetes", "ray", "slinky")]


def _first_per_version(bp: Blueprint):
    """One fleet per distinct version (cluster-version reports fleets that disagree)."""
    seen: dict[str, object] = {}
    for fleet in _eks_fleets(bp):
        seen.setdefault(fleet.scheduler.version, fleet)
    return list(seen.values())


@rule("eks-version", "error", "the EKS cluster's Kubernetes version is one EKS still offers, by its release calendar",
      stage="cluster")
def eks_version(bp: Blueprint, report: Reporter) -> None:
    fleets = _first_per_version(bp)
    if not fleets:
        return
    try:
        day = today()
    except ValueError as err:
        report(fleets[0].scheduler.path + ("version",), f"{err}: the EKS support dates cannot be compared",
               "unset FLEETFORM_TODAY, or give it as 2026-11-24")
        return
    known = {v.version: v for v in calendar()}
    offered = [v.version for v in calendar() if day < v.end_of_extended]
    for fleet in fleets:
        version = fleet.scheduler.version
        entry = known.get(version)
        path = fleet.scheduler.path + ("version",)
        if entry is None and _newer_than_calendar(version):
            continue  # eks-version-support warns: EKS releases a version every few months, the calendar lags
        if entry is None:
            report(path, f"Kubernetes {version} is not in fleetform's EKS release calendar (known: "
                   f"{', '.join(known)}; {CALENDAR_SOURCE})",
                   f"use a version EKS offers: {', '.join(offered)}" if offered else out_of_date_hint(day))
        elif day >= entry.end_of_extended:
            standard = in_standard_support(day)
            report(path, f"EKS ended extended support of Kubernetes {version} on {entry.end_of_extended}: no new "
                   f"cluster can be created with it, and existing ones are upgraded by EKS ({CALENDAR_SOURCE})",
                   f"use a version in standard support: {', '.join(v.version for v in standard)}" if standard
                   else out_of_date_hint(day))


@rule("eks-version-support", "warning",
      "the EKS cluster's Kubernetes version is in EKS standard support (extended support is billed per cluster hour)",
      stage="cluster")
def eks_version_support(bp: Blueprint, report: Reporter) -> None:
    fleets = _first_per_version(bp)
    try:
        day = today()
    except ValueError:
        return  # eks-version reports it
    known = {v.version: v for v in calendar()}
    standard = in_standard_support(day)
    for fleet in fleets:
        entry = known.get(fleet.scheduler.version)
        if entry is None and _newer_than_calendar(fleet.scheduler.version):
            newest = calendar()[-1].version
            report(fleet.scheduler.path + ("version",),
                   f"Kubernetes {fleet.scheduler.version} is newer than fleetform's EKS release calendar (newest "
                   f"{newest}; {CALENDAR_SOURCE}): whether EKS offers it, and until when, is not checked",
                   "check that EKS offers it in the region (`aws eks describe-cluster-versions`), or use "
                   f"{newest}; a running cluster goes one minor version at a time")
            continue
        if entry is None or not entry.end_of_standard <= day < entry.end_of_extended:
            continue
        report(fleet.scheduler.path + ("version",),
               f"EKS standard support of Kubernetes {entry.version} ended on {entry.end_of_standard}: the cluster "
               f"runs in extended support until {entry.end_of_extended}, billed {EXTENDED_PRICE} (AWS Containers "
               f"blog, \"Amazon EKS extended support for Kubernetes versions pricing\"; {CALENDAR_SOURCE})",
               (f"upgrade to a version in standard support; the oldest in standard support is {standard[0].version}"
                + (f", the newest {standard[-1].version}" if len(standard) > 1 else "")
                + _one_step(entry)) if standard
               else out_of_date_hint(day))


def _newer_than_calendar(version: str) -> bool:
    """A version past the calendar's newest row that fleetform renders for (K8S_MAX): EKS may well offer it
    already (a new minor version every few months), so it is a warning, not the unknown-version error."""
    from .inference import K8S_MAX

    try:
        minor = tuple(int(part) for part in version.split("."))
    except ValueError:
        return False
    return len(minor) == 2 and calendar()[-1].minor < minor <= K8S_MAX


def _one_step(entry) -> str:
    """EKS updates a running cluster's control plane one minor version per update (EKS User Guide, eksctl
    "Cluster upgrades": "Control plane version upgrades must be done for one minor version at a time")."""
    major, minor = entry.minor
    return (f"; a running cluster goes one minor version at a time: {major}.{minor + 1} first, one `pulumi up` "
            "each (a new cluster takes any)")


def version_step(old: Blueprint, new: Blueprint) -> tuple[tuple, str, str] | None:
    """`fleetform diff`'s check of a version change of the same running EKS cluster: EKS updates a control plane
    one minor version at a time and never back (EKS User Guide, "Update existing cluster to new Kubernetes
    version": "you can't downgrade"; eksctl "Cluster upgrades": "one minor version at a time"), so UpdateClusterVersion
    refuses a jump or a downgrade after `pulumi up` has changed everything before it. (path, message, hint) or None.
    The caller skips a new cluster (a region move or a cluster id change builds one, which takes any version)."""
    before, after = _eks_fleets(old), _eks_fleets(new)
    if not before or not after:
        return None
    was, now = before[0].scheduler.version, after[0].scheduler.version
    try:
        (a, b), (c, d) = (tuple(int(x) for x in v.split(".")) for v in (was, now))
    except ValueError:
        return None
    if (a, b) == (c, d) or (a == c and d == b + 1):
        return None
    path = after[0].scheduler.path + ("version",)
    if (c, d) < (a, b):
        return (path, f"the running EKS cluster's Kubernetes {was} cannot go down to {now}: EKS updates a control "
                f"plane forward only", f"keep {was}, or build a new cluster (a new stack) on {now}")
    return (path, f"the running EKS cluster's Kubernetes {was} cannot go to {now} in one change: EKS updates a "
            f"control plane one minor version at a time", f"set {a}.{b + 1} first and `pulumi up`, then the next minor "
            f"version, one change each, up to {now}")
