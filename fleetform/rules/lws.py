"""Rules of multi-node replicas (fleetform/lws.py): a model whose tensor_parallel x pipeline_parallel is more than
a node's GPUs is a LeaderWorkerSet group of whole nodes, which needs the GPUs to come out even, a fast network
between the nodes, and tensor parallelism kept inside a node where it can be."""

from __future__ import annotations

from ..model import Blueprint
from . import Reporter, rule


def _spanning(bp: Blueprint):
    """(fleet, model, GPUs per node) of every inference model whose replica is more than one node."""
    for fleet in bp.fleets:
        if fleet.training or fleet.shape is None or fleet.gpu_sharing.strategy != "none":
            continue  # shared GPUs: tensor-parallel reports any split
        per_node = fleet.shape.gpu_count
        for model in fleet.models:
            if model.gpus > per_node:
                yield fleet, model, per_node


@rule("lws-parallelism", "error", "a replica spanning nodes has tensor_parallel x pipeline_parallel equal to the GPUs "
      "of its whole nodes")
def lws_parallelism(bp: Blueprint, report: Reporter) -> None:
    """A LeaderWorkerSet group is whole nodes, one pod each with all of a node's GPUs (the Kubernetes device plugin
    hands out whole GPUs per pod; vLLM's Ray executor places one worker per GPU of the world size
    tensor_parallel x pipeline_parallel): a world size that is not a multiple of a node's GPUs leaves GPUs of the
    last node idle or asks for more than it has."""
    for fleet, model, per_node in _spanning(bp):
        if model.gpus % per_node:
            below, above = model.gpus // per_node * per_node, -(-model.gpus // per_node) * per_node
            report(model.path + ("pipeline_parallel" if model.pipeline_parallel > 1 else "tensor_parallel",),
                   f"tensor_parallel {model.tensor_parallel} x pipeline_parallel {model.pipeline_parallel} = "
                   f"{model.gpus} GPUs a replica, not a whole number of {fleet.instance_type or 'node'}s "
                   f"({per_node} GPUs each)",
                   f"make tensor_parallel x pipeline_parallel {above}" + (f" or {below}" if below > per_node else "")
                   + f" (tensor_parallel {per_node} x pipeline_parallel {above // per_node}: nodes x GPUs per node)")


@rule("lws-interconnect", "error", "a replica spanning nodes runs on an instance type with EFA")
def lws_interconnect(bp: Blueprint, report: Reporter) -> None:
    """Every token of a pipeline-parallel replica crosses the nodes (activations between stages), and of a
    tensor-parallel one crossing nodes every layer's all-reduce: over the VPC's TCP that is the bottleneck of
    every request. The catalog says which instance types have EFA (providers/aws/instances.json, max_efa)."""
    for fleet, model, per_node in _spanning(bp):
        if fleet.instance is not None and not fleet.instance.max_efa:
            report(model.path + ("pipeline_parallel" if model.pipeline_parallel > 1 else "tensor_parallel",),
                   f"a replica of '{model.name}' spans {-(-model.gpus // per_node)} {fleet.instance_type} nodes, "
                   f"which have no EFA: its GPUs would talk over TCP between nodes",
                   "use an instance type with EFA (p4d, p4de, p5, p5e, p5en, p6: `fleetform catalog`), or one whose "
                   "GPUs hold the model on one node")


@rule("lws-tp-within-node", "warning", "tensor parallelism stays inside a node; pipeline parallelism spans nodes")
def lws_tp_within_node(bp: Blueprint, report: Reporter) -> None:
    """Tensor parallelism all-reduces every layer's activations: inside a node over NVLink, across nodes over
    the network, an order of magnitude slower. vLLM's distributed serving guide: tensor parallel size the GPUs
    of a node, pipeline parallel size the nodes."""
    for fleet, model, per_node in _spanning(bp):
        if model.tensor_parallel > per_node and model.tensor_parallel % per_node == 0:
            stages = model.tensor_parallel // per_node * model.pipeline_parallel
            report(model.path + ("tensor_parallel",),
                   f"tensor_parallel {model.tensor_parallel} splits each layer across "
                   f"{model.tensor_parallel // per_node} nodes of {per_node} GPUs: its all-reduces leave NVLink",
                   f"use tensor_parallel {per_node} and pipeline_parallel {stages}")
        elif model.tensor_parallel > per_node:
            report(model.path + ("tensor_parallel",),
                   f"tensor_parallel {model.tensor_parallel} is more than the {per_node} GPUs of a node",
                   f"use tensor_parallel {per_node} and raise pipeline_parallel")


@rule("lws-efa-image", "warning", "a replica spanning EFA nodes runs an image that carries aws-ofi-nccl")
def lws_efa_image(bp: Blueprint, report: Reporter) -> None:
    """NCCL reaches EFA only through the aws-ofi-nccl net plugin over libfabric's efa provider, both in the
    container; without them it falls back to TCP sockets on the pod's network, silently, although every pod
    holds the node's EFA interfaces. The stock vllm/vllm-openai image installs neither (vLLM's
    docker/Dockerfile at v0.11.0 installs no EFA userspace; vllm-project/vllm#55635 asks for it). AWS's vLLM
    Deep Learning Container is built FROM vllm/vllm-openai and runs the EFA installer (aws/deep-learning-containers
    vllm/x86_64/gpu/Dockerfile: install_efa.sh, /opt/amazon/ofi-nccl/lib on LD_LIBRARY_PATH)."""
    from ..lws import lacks_efa_plugin

    for fleet, model, per_node in _spanning(bp):
        if fleet.instance is None or not fleet.instance.max_efa or not lacks_efa_plugin(model.image):
            continue
        report(model.path + ("image",),
               f"a replica of '{model.name}' spans {-(-model.gpus // per_node)} EFA nodes, but {model.image} carries "
               f"no libfabric or aws-ofi-nccl: NCCL between the pods falls back to TCP sockets",
               "use an image with the EFA installer and aws-ofi-nccl: AWS's vLLM Deep Learning Container "
               "(763104351884.dkr.ecr.<region>.amazonaws.com/vllm, built FROM vllm/vllm-openai) or your own "
               "FROM vllm/vllm-openai that runs the EFA installer (AWS docs: 'Install EFA in a container'; "
               "aws-ofi-nccl README)")
