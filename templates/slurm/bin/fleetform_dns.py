"""Node names in the fleet's Route 53 private hosted zone, the AWS ParallelCluster way
(aws-parallelcluster-node, src/slurm_plugin/instance_manager.py, `_update_dns_hostnames`: after a
launch, one `UPSERT` of `<node>.<dns_domain>` A `<private ip>`, TTL 120, per instance, sent in
batches of at most 500 changes because ChangeResourceRecordSets takes 1,000 and an UPSERT counts
twice). Every machine's resolver has the zone as search domain (bootstrap), so the short name
`train-001` resolves everywhere: hostname rendezvous (torchrun, MPI host files) works.

The Pulumi program makes the zone (private, associated with the fleet's VPC) and puts its id and
name into the environment file (FLEETFORM_DNS_ZONE_ID, FLEETFORM_DNS_ZONE); without them (an older
environment file) nothing here runs. The controller's role may change only A records of that zone
(docs/aws-training.md). resume writes the records, suspend deletes those of the nodes it
terminates, and the keeper deletes records of nodes that have no instance any more.
"""

from __future__ import annotations

import json

from fleetform_node import aws, log

BATCH = 500  # UPSERTs per ChangeResourceRecordSets call: each counts twice against its 1,000
TTL = 120  # seconds, as ParallelCluster: a replaced node's new address is seen within two minutes


def zone(env: dict[str, str]) -> tuple[str, str] | None:
    """(hosted zone id, zone name) from the environment file, or None where the fleet has none."""
    zone_id, name = env.get("FLEETFORM_DNS_ZONE_ID", ""), env.get("FLEETFORM_DNS_ZONE", "").rstrip(".")
    return (zone_id, name) if zone_id and name else None


def _change(env: dict[str, str], zone_id: str, changes: list[dict]) -> None:
    for start in range(0, len(changes), BATCH):
        aws(env, "route53", "change-resource-record-sets", "--hosted-zone-id", zone_id,
            "--change-batch", json.dumps({"Comment": "fleetform node names", "Changes": changes[start:start + BATCH]}))


def upsert(env: dict[str, str], addresses: dict[str, str]) -> None:
    """`<node>.<zone>` A `<address>` for each node: new ones created, a replaced node's updated."""
    found = zone(env)
    if found is None or not addresses:
        return
    zone_id, name = found
    _change(env, zone_id, [{"Action": "UPSERT", "ResourceRecordSet": {
        "Name": f"{node}.{name}", "Type": "A", "TTL": TTL, "ResourceRecords": [{"Value": address}]}}
        for node, address in sorted(addresses.items())])
    log(f"DNS: {' '.join(f'{n}.{name}={a}' for n, a in sorted(addresses.items()))}")


def records(env: dict[str, str]) -> dict[str, dict]:
    """The zone's A records of nodes, by short name (`train-001` for `train-001.<zone>.`). The CLI
    reads every page of ListResourceRecordSets."""
    found = zone(env)
    if found is None:
        return {}
    zone_id, name = found
    suffix = f".{name}."
    listed = aws(env, "route53", "list-resource-record-sets", "--hosted-zone-id", zone_id)
    return {r["Name"][:-len(suffix)]: r for r in listed.get("ResourceRecordSets", [])
            if r["Type"] == "A" and r["Name"].endswith(suffix) and "." not in r["Name"][:-len(suffix)]}


def delete(env: dict[str, str], nodes: list[str]) -> list[str]:
    """Deletes the A records of these nodes (a DELETE must repeat the record as it is, so they are
    read first); returns the names deleted."""
    found = zone(env)
    if found is None:
        return []
    present = records(env)
    gone = sorted(n for n in set(nodes) if n in present)
    if gone:
        _change(env, found[0], [{"Action": "DELETE", "ResourceRecordSet": present[n]} for n in gone])
        log(f"DNS: deleted {' '.join(f'{n}.{found[1]}' for n in gone)}")
    return gone
