"""Rules of precise prefix-cache routing (fleetform/kvevents.py): combinations under which vLLM's KV events would
not reach the scorer, or would reach it in a form whose block hashes match nothing, so that routing silently falls
back to the load scorers alone."""

from __future__ import annotations

from ..kvevents import BLOCK_SIZE, HASH_ALGO, precise
from ..model import Blueprint
from . import Reporter, rule
from .inference import _is_option, flag_name, vllm_options
from .lws import _spanning

FLAGS = {
    "--no-enable-prefix-caching": "turns prefix caching off: no block is cached, so no KV event is published",
    "--block-size": f"would differ from the scorer's blockSize {BLOCK_SIZE}: the scorer would pair none of the "
                    "replica's blocks with its own keys, so every lookup would miss",
    "--prefix-caching-hash-algo": f"fleetform sets {HASH_ALGO}, whose block hashes are the same in every replica's "
                                  "process",
    "--kv-events-config": "fleetform sets the publisher, the picker's endpoint and the topic the scorer parses",
    "--enable-prefix-caching": "fleetform sets it",
    "--data-parallel-size": "each data-parallel rank publishes to the endpoint's port + its rank (vLLM "
                            "ZmqEventPublisher.offset_endpoint_port), where the picker does not listen",
    "-dp": "each data-parallel rank publishes to the endpoint's port + its rank (vLLM "
           "ZmqEventPublisher.offset_endpoint_port), where the picker does not listen",
}
"""vLLM flags the precise scorer depends on (fleetform/kvevents.py has the sources), and why extra_args may not set
them where a fleet's gateway routes by precise prefix."""


@rule("prefix-routing", "error", "precise prefix routing: vLLM publishes KV events the picker can read and match")
def prefix_routing(bp: Blueprint, report: Reporter) -> None:
    """The scorer needs every replica's events and its own tokens of the request to hash to the same blocks: the
    flags that decide the blocks are fleetform's, the tokenizer comes from the model's Hub repository (the picker's
    init container), and a replica is one pod whose IP is the pool's endpoint."""
    fleets = [f for f in bp.fleets if not f.training and precise(f)]
    if not fleets:
        return
    options = vllm_options()
    for fleet in fleets:
        for model in fleet.models:
            for i, arg in enumerate(model.extra_args):
                if not _is_option(arg, options):
                    continue
                name = flag_name(arg)
                if name in FLAGS:
                    report(model.path + ("extra_args", i),
                           f"{name} in extra_args of model '{model.name}', whose gateway routes by precise prefix: "
                           f"{FLAGS[name]}",
                           "remove it, or set gateway.prefix_routing: approximate")
            weights = model.weights
            if weights is not None and weights.source != "hub":
                report(weights.path + ("source",),
                       f"model '{model.name}' loads its weights from {weights.source}, but precise prefix routing "
                       "fetches its tokenizer from the Hub repository `model` names",
                       "serve it from the Hub (weights.source: hub, with a revision), or set gateway.prefix_routing: "
                       "approximate")
    for fleet, model, per_node in _spanning(bp):
        if precise(fleet):
            report(model.path + ("pipeline_parallel" if model.pipeline_parallel > 1 else "tensor_parallel",),
                   f"a replica of '{model.name}' spans {-(-model.gpus // per_node)} nodes (a LeaderWorkerSet): "
                   "fleetform renders KV events for replicas of one pod only",
                   "fit the model on one node, or set gateway.prefix_routing: approximate")


@rule("prefix-routing-adapters", "warning", "precise prefix routing finds no cached block for a LoRA adapter's requests")
def prefix_routing_adapters(bp: Blueprint, report: Reporter) -> None:
    """The scorer keys a stored block under the event's LoRA name where the event has one, else under the topic's
    model (llm-d-kv-cache v0.5.0 pkg/kvevents/pool.go digestEvents), and a request's blocks under the request's
    model, the adapter's name (pkg/kvcache/indexer.go GetPodScores). vLLM 0.11.0's BlockStored carries lora_id but no
    lora_name (vllm/distributed/kv_events.py of the 0.11.0 wheel), so an adapter's blocks are stored under the served
    name: the adapter's requests score 0 on every replica and go by load."""
    for fleet in bp.fleets:
        if fleet.training or not precise(fleet):
            continue
        for model in fleet.models:
            if model.lora is not None and model.lora.adapters:
                names = ", ".join(a.name for a in model.lora.adapters)
                report(model.path + ("adapters",),
                       f"model '{model.name}' serves LoRA adapters ({names}): precise prefix routing matches no "
                       "cached block for their requests, which the picker places by load alone",
                       "accept it for the adapters' traffic, or set gateway.prefix_routing: approximate")
