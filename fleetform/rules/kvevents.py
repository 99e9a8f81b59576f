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
    "--block-size": f"would differ from the scorer's blockSize {BLOCK_SIZE}: every block hash would differ",
    "--prefix-caching-hash-algo": f"the scorer hashes blocks as {HASH_ALGO} (CBOR + SHA-256) only",
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
    """vLLM hashes a block of an adapter's request with the adapter's id as an extra key (v0.11.0
    vllm/v1/core/kv_cache_utils.py _gen_lora_extra_hash_keys), and the scorer hashes tokens with none
    (llm-d-kv-cache-manager v0.4.0 token_processor.go: hash(parent, tokens, nil)) under the request's model, the
    adapter's name, with which no event's topic is keyed: those requests score 0 on every replica and go by load."""
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
