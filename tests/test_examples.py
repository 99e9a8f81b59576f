"""Every example blueprint validates with no findings but the ones it is meant to show, and resolves
to the model later stages use."""

from __future__ import annotations

import pytest

from conftest import EXAMPLES
from fleetform.pipeline import check


MEANT = {
    # the reference's 70B x 2,000B-token run takes 512 days on its 6-node Capacity Block (182 days at most)
    # its serving fleets on Kubernetes 1.33, out of EKS standard support on the suite's day (conftest TODAY), and
    # its Hub models without a pinned commit (the reference is the contract; inference-l4's FP8 copies have no commit
    # fleetform found a source for)
    "reference.yaml": [("warning", "capacity-duration"), ("warning", "eks-version-support"),
                       ("warning", "hf-revision-unpinned"), ("warning", "hf-revision-unpinned")],
    "inference-l4.yaml": [("warning", "hf-revision-unpinned")] * 2,
    "shared-node.yaml": [("warning", "hf-revision-unpinned")],  # the same FP8 Qwen copy as inference-l4's
    "team-llm.yaml": [],  # vllm-serving 1.1.0 and team-llm pin their models' Hub commits
    # llama-8b's wake from zero behind kgateway is unproven (kgateway-dev/kgateway#12219); the gateway's CRDs and
    # kgateway are installed by the Pulumi program (tests/test_gateway_install.py)
    "inference-gateway.yaml": [("warning", "gateway-wake")],
    "inference-router.yaml": [],
    # the stock vLLM image has no aws-ofi-nccl, so the group's NCCL uses sockets (lws-efa-image names AWS's vLLM
    # image); the 405B model from the Hub without a pinned commit: fleetform found no source for one
    "inference-multinode.yaml": [("warning", "lws-efa-image"), ("warning", "hf-revision-unpinned")],
    # its job users come from the LDAP directory scheduler.directory names: no slinky-users warning; its slurmd pods
    # run the chart's image, which has no aws-ofi-nccl (slinky-efa-image): fleetform names no image the team has not
    # built, so NCCL between its nodes uses sockets until the team sets scheduler.slurmd_image
    "slurm-on-eks.yaml": [("warning", "slinky-efa-image")],
}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_validates_clean(path):
    result = check(path)
    assert [(f.severity.value, f.rule) for f in result.findings] == MEANT.get(path.name, []), [
        f.to_text() for f in result.findings]
    assert result.model is not None


def test_examples_cover_the_issue():
    names = {p.name for p in EXAMPLES}
    assert {"reference.yaml", "onprem-ib.yaml", "inference-l4.yaml"} <= names


def test_reference_model_is_resolved():
    model = check(next(p for p in EXAMPLES if p.name == "reference.yaml")).model
    train, serve, small = model.fleets
    assert (train.shape.gpu.name, train.shape.gpu_count, train.nodes.max) == ("H100-80GB", 8, 6)
    assert train.interconnect.fabric == "efa" and train.placement == "cluster"
    assert serve.nodes.elastic and (serve.nodes.min, serve.nodes.max) == (1, 10)
    assert serve.models[0].replicas.min == 2 and serve.models[0].autoscale.target_per_replica == 5
    assert small.gpu_sharing.profile == "3g.40gb" and small.shape.gpu.name == "A100-80GB"
    assert model.storage_named("checkpoints").versioning is True


def test_onprem_example_is_six_nodes_under_three_switches():
    model = check(next(p for p in EXAMPLES if p.name == "onprem-ib.yaml")).model
    (train,) = model.fleets
    assert model.cloud == "onprem" and train.nodes.max == 6
    assert train.scheduler.topology.nodes_per_switch * 3 == train.nodes.max
    assert train.interconnect.fabric == "infiniband"
    assert train.shape.vcpus == 224


def test_l4_example_gives_each_pod_a_whole_gpu():
    """Half an L4 leaves an 8B fp8 model no KV cache once vLLM's activation peak and CUDA overhead are
    counted (kv-cache-room), so the example serves one pod per L4, with no finding about its fit (its Hub
    models' unpinned revisions are warnings of their own)."""
    result = check(next(p for p in EXAMPLES if p.name == "inference-l4.yaml"))
    (chat,) = result.model.fleets
    assert chat.shape.gpu.name == "L4"
    assert chat.gpu_sharing.strategy == "none"
    assert [f.rule for f in result.findings] == ["hf-revision-unpinned"] * 2
