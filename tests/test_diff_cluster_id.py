"""A change of the cluster id (<metadata.name>_<stack>) replaces the EKS cluster and everything named after the
blueprint: `fleetform diff` says so in its own section (tests/golden-diff/blueprint-renamed.* show it whole)."""

from __future__ import annotations

from fleetform.changes import Change, Disruption, cluster_id_change
from fleetform.commands.diff import _cluster_id_lines

CLUSTER = "aws:eks/cluster:Cluster"


def _resources(cluster_id: str) -> list[dict]:
    tags = {"fleetform:cluster": cluster_id, "fleetform:blueprint": cluster_id.split("_")[0]}
    return [{"type": CLUSTER, "name": "eks-cluster", "inputs": {"name": cluster_id, "tags": tags}},
            {"type": "aws:s3/bucket:Bucket", "name": "storage-checkpoints", "inputs": {"tags": tags}}]


def test_a_new_cluster_id_is_named_with_what_it_replaces_and_loses():
    changes = [Change("replace", CLUSTER, "eks-cluster"), Change("replace", "aws:s3/bucket:Bucket", "storage-checkpoints"),
               Change("update", "aws:iam/role:Role", "iam-node")]
    lost = [Disruption("data loss", "Bucket storage-checkpoints", "replaced by an empty one")]
    change = cluster_id_change(_resources("llm-70b_prod"), _resources("llm-70c_prod"), changes, lost)
    assert (change["old"], change["new"], change["replaced"]) == ("llm-70b_prod", "llm-70c_prod", 2)
    assert change["eks"] == ["EKS cluster eks-cluster (named after the id): replaced by a new, empty cluster"]
    assert change["data_lost"] == ["Bucket storage-checkpoints"]
    text = "\n".join(_cluster_id_lines(change, markdown=False))
    assert "moves from llm-70b_prod to llm-70c_prod: `pulumi up` on the same stack replaces 2 resources" in text
    assert "another stack beside the running one" in text and "data lost: Bucket storage-checkpoints" in text


def test_the_same_cluster_id_or_no_recorded_id_is_no_cluster_id_change():
    assert cluster_id_change(_resources("a_dev"), _resources("a_dev"), [], []) is None
    assert cluster_id_change([], _resources("a_dev"), [], []) is None
