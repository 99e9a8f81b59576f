"""Rules over the blueprint as a whole: names, references, provider and network."""

from __future__ import annotations

import ipaddress
import re
from collections import Counter

from ..model import Blueprint
from . import Reporter, did_you_mean, rule


def _duplicates(report: Reporter, items, what: str, where: str) -> None:
    counts = Counter(item.name for item in items)
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        if counts[item.name] > 1:
            if item.name in first:
                report(item.path + ("name",), f"{what} name '{item.name}' is used more than once{where}",
                       f"{what} names must be unique; the first is {what} #{first[item.name] + 1}")
            else:
                first[item.name] = index


def _earlier_names(bp: Blueprint, report: Reporter) -> None:
    """A fleet's earlier names are its identity in the cloud and the cluster (Fleet.cloud_name: node
    labels, device plugin configs, the Pulumi aliases): one that is another fleet's name, or another
    fleet's earlier name too, gives two fleets one node label and one alias."""
    for index, fleet in enumerate(bp.fleets):
        for n, old in enumerate(fleet.renamed_from):
            other = next((f for i, f in enumerate(bp.fleets) if i != index and f.name == old), None)
            if other is None:
                other = next((f for f in bp.fleets[:index] if old in f.renamed_from), None)
            if other is not None:
                how = "the name" if other.name == old else "an earlier name"
                report(fleet.path + ("renamed_from", n), f"fleet '{fleet.name}' lists '{old}' as an earlier name, "
                       f"but it is {how} of fleet '{other.name}': both fleets would carry it in the cloud and "
                       "the cluster (node labels, Pulumi aliases)",
                       "a fleet's earlier names must be its own; rename the other fleet, or drop the entry")


def _models_per_namespace(bp: Blueprint, report: Reporter) -> None:
    """A model's Kubernetes objects (Deployment, Service, PodDisruptionBudget, autoscaler, ...) are
    named after it in its fleet's namespace, and a blueprint's inference fleets share one cluster: two
    fleets serving a model of one name in one namespace would render one object twice, the second
    replacing the first when applied."""
    first: dict[tuple[str, str], str] = {}
    for fleet in bp.fleets:
        scheduler = fleet.scheduler
        if fleet.training or scheduler is None or scheduler.type != "kubernetes":
            continue
        for model in fleet.models:
            key = (scheduler.namespace, model.name)
            if key in first and first[key] != fleet.name:
                report(model.path + ("name",), f"model name '{model.name}' is used by fleet '{first[key]}' too, in "
                       f"the same namespace '{scheduler.namespace}': their Kubernetes objects would be one",
                       "rename one of the models, or give the fleets different namespaces")
            first.setdefault(key, fleet.name)


@rule("unique-names", "error", "fleets, storage, pools, models, a model's adapters, partitions, switches, teams and a fleet's users have unique names; "
      "a fleet's earlier names (renamed_from) are no other fleet's; one model name per Kubernetes namespace")
def unique_names(bp: Blueprint, report: Reporter) -> None:
    _duplicates(report, bp.storage, "storage", "")
    _duplicates(report, bp.fleets, "fleet", "")
    _duplicates(report, bp.pools, "pool", "")
    _earlier_names(bp, report)
    _models_per_namespace(bp, report)
    for fleet in bp.fleets:
        _duplicates(report, fleet.models, "model", f" in fleet '{fleet.name}'")
        for model in fleet.models:  # LoRA adapters (fleetform/lora.py); across models and against them: lora-names
            if model.lora is not None:
                _duplicates(report, model.lora.adapters, "adapter", f" of model '{model.name}'")
        if fleet.login is not None:  # users (fleetform/login.py): one account per name on every machine
            _duplicates(report, fleet.login.users, "user", f" in fleet '{fleet.name}'")
        scheduler = fleet.scheduler
        if scheduler is not None and scheduler.type == "slurm":
            _duplicates(report, scheduler.partitions, "partition", f" in fleet '{fleet.name}'")
            _duplicates(report, fleet.teams, "team", f" in fleet '{fleet.name}'")  # one Slurm account each
            if scheduler.topology is not None:
                _duplicates(report, scheduler.topology.switches, "switch", f" in fleet '{fleet.name}'")


@rule("storage-ref", "error", "every storage a fleet attaches is declared under storage")
def storage_ref(bp: Blueprint, report: Reporter) -> None:
    names = [s.name for s in bp.storage]
    for fleet in bp.fleets:
        for index, name in enumerate(fleet.storage):
            if name not in names:
                hint = did_you_mean(name, names, "declared storage") if names else "declare it under `storage:`"
                report(fleet.path + ("storage", index), f"fleet '{fleet.name}' attaches storage '{name}', "
                       "which is not declared", hint)


@rule("provider-fields", "error", "AWS blueprints name a region and zone that agree; on-prem ones describe no cloud")
def provider_fields(bp: Blueprint, report: Reporter) -> None:
    if bp.cloud == "aws":
        if bp.availability_zone and bp.region and not bp.availability_zone.startswith(bp.region):
            report(("provider", "availability_zone"),
                   f"availability zone '{bp.availability_zone}' is not in region '{bp.region}'",
                   f"use a zone of {bp.region}, e.g. {bp.region}a")
        if bp.site is not None:
            report(("provider", "site"), "site applies to on-prem blueprints", "remove it for cloud: aws")
        return
    for field in ("region", "availability_zone"):
        if getattr(bp, field) is not None:
            report(("provider", field), f"{field} applies to cloud: aws", "remove it for an on-prem blueprint")
    if bp.network.cidr or bp.network.vpc_id or bp.network.subnet_id or bp.network.ssh_ingress_cidrs:
        report(("provider", "network"), "network describes an AWS VPC; fleetform does not manage on-prem networks",
               "remove provider.network; describe each fleet's fabric under interconnect")


@rule("network", "error", "an AWS network is either a new VPC (cidr /16 to /28) or an existing vpc_id with subnet_id")
def network(bp: Blueprint, report: Reporter) -> None:
    if bp.cloud != "aws":
        return
    net = bp.network
    existing = net.vpc_id is not None or net.subnet_id is not None
    if net.cidr and existing:
        report(net.path, "network gives both cidr (a new VPC) and an existing vpc_id/subnet_id",
               "keep cidr to create a VPC, or vpc_id and subnet_id to use one")
    elif existing and (net.vpc_id is None or net.subnet_id is None):
        missing = "subnet_id" if net.subnet_id is None else "vpc_id"
        report(net.path, f"an existing network needs both vpc_id and subnet_id; {missing} is missing",
               f"add {missing}")
    elif not net.cidr and not existing:
        report(net.path, "no network: give cidr for a new VPC, or vpc_id and subnet_id",
               "e.g. `network: {cidr: 10.40.0.0/16}`")
    if net.cidr:
        address = ipaddress.ip_network(net.cidr, strict=False)
        if not 16 <= address.prefixlen <= 28:
            report(net.path + ("cidr",), f"a VPC CIDR block is /16 to /28, not /{address.prefixlen}",
                   "AWS accepts VPC sizes from /16 to /28")
        elif str(address) != net.cidr:
            report(net.path + ("cidr",), f"'{net.cidr}' has host bits set", f"write the network address: {address}")
    for index, cidr in enumerate(net.ssh_ingress_cidrs):
        address = ipaddress.ip_network(cidr, strict=False)
        if str(address) != cidr:  # AWS's security group rule and the plan's checks want the network address
            host = cidr.split("/")[0]
            report(net.path + ("ssh_ingress_cidrs", index), f"SSH ingress CIDR '{cidr}' has host bits set",
                   f"for the one host write {host}/{address.max_prefixlen}; for the whole network it names, "
                   f"{address}" + (" (the whole Internet)" if address.prefixlen == 0 else ""))


INSTANCE_TAG_KEY = re.compile(r"[A-Za-z0-9+\-=.,_:@]+")
"""The tag keys an instance may carry while its tags are readable through instance metadata
(Amazon EC2 User Guide, "View tags for your EC2 instances using instance metadata": keys may only use
letters, digits and `+ - = . , _ : @`, no space or `/`, and may not be only `.`, `..` or `_index`;
a launch with such a tag fails while `instance_metadata_tags` is enabled)."""
INSTANCE_TAG_KEYS_REFUSED = (".", "..", "_index")


@rule("tag-key-imds", "error", "labels that tag AWS instances have keys instance metadata can serve (no '/')")
def tag_key_imds(bp: Blueprint, report: Reporter) -> None:
    """Every label is a tag of every resource (providers/aws/common.py tags_of), the training fleets'
    nodes and controllers among them, and those instances have tags in instance metadata (a node
    learns its Slurm name from its tag): one key that instance metadata cannot serve fails every
    launch. Kubernetes allows a `prefix/` in a label key; such a key cannot tag these instances."""
    if bp.cloud != "aws" or not any(f.training for f in bp.fleets):
        return
    for key in bp.labels:
        if not INSTANCE_TAG_KEY.fullmatch(key) or key in INSTANCE_TAG_KEYS_REFUSED:
            bad = "'/'" if "/" in key else "a character outside letters, digits and + - = . , _ : @"
            report(("metadata", "labels", key), f"label '{key}' has {bad}: as a tag of the training fleets' "
                   "instances, whose tags are in instance metadata, it fails every launch",
                   f"use a key of letters, digits and - _ . :, e.g. '{key.rsplit('/', 1)[-1]}'", key=True)


@rule("ssh-open", "warning", "SSH ingress from the whole internet (0.0.0.0/0, however it is split) is deliberate")
def ssh_open(bp: Blueprint, report: Reporter) -> None:
    cidrs = bp.network.ssh_ingress_cidrs
    for index, cidr in enumerate(cidrs):
        if ipaddress.ip_network(cidr, strict=False).prefixlen == 0:
            report(bp.network.path + ("ssh_ingress_cidrs", index), "SSH is open to the whole internet",
                   "reach the nodes through SSM, or list your own networks' CIDRs")
            return
    merged = list(ipaddress.collapse_addresses(n for n in (ipaddress.ip_network(c, strict=False) for c in cidrs)
                                               if n.version == 4))
    if any(n.prefixlen == 0 for n in merged):  # 0.0.0.0/1 + 128.0.0.0/1 is the whole internet too
        report(bp.network.path + ("ssh_ingress_cidrs",),
               f"SSH is open to the whole internet: {', '.join(cidrs)} together cover every IPv4 address",
               "reach the nodes through SSM, or list your own networks' CIDRs")
