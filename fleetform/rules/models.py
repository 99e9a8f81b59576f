"""Rules that hold a served model against the model catalog (providers/models.json): its parameter
count, its longest context, and whether one sequence of that context fits the KV cache."""

from __future__ import annotations

from ..model import Blueprint, Model
from ..models import GIB, derived_max_len
from ..fit import BLOCK_TOKENS, kv_cache_tokens, kv_dtype_bytes
from . import UNIQUE_NAMES, Reporter, rule
from .inference import _inference, _usable_gb, fit_options

PARAMS_TOLERANCE = 0.10
"""How far model_params_billion may be from the catalog's figure: model cards round (8B for 8.03B,
7.6B for 7.61B); more than 10% off is a different model's figure."""



def _catalog_source(model: Model, key: str) -> str:
    """Where the catalog read the figure: its first words (`fleetform catalog --models` shows the rest)."""
    return model.spec.sources[key].split(" (", 1)[0]


@rule("model-params", "error", "model_params_billion agrees within 10% with the model catalog's figure for the "
      "named model")
def model_params(bp: Blueprint, report: Reporter) -> None:
    """An error, not a warning: the figure sizes the weights (model-fits, kv-cache-room, kv-cache-fit),
    the cache volume the checkpoint is downloaded to and the startup probe's budget (k8s.py). A Hub id
    names one checkpoint, whose parameter count is a fact: a figure more than 10% off makes every one
    of those wrong, and the fix is to correct it or leave it out for the catalog to give."""
    for fleet in _inference(bp):
        for model in fleet.models:
            spec = model.spec
            if spec is None or not model.params_given:
                continue
            given, known = model.model_params_billion, spec.params_billion
            if abs(given - known) > PARAMS_TOLERANCE * known:
                moe = (f" ({spec.active_params_billion:g}B active per token; every expert sits in GPU memory)"
                       if spec.active_params_billion else "")
                report(model.path + ("model_params_billion",),
                       f"'{model.model}' has {known:g}B parameters{moe}, not {given:g}B: {abs(given - known) / known:.0%} "
                       f"off, and the memory sizing, cache volume and startup budget follow this figure "
                       f"(source: {_catalog_source(model, 'params_billion')})",
                       f"write model_params_billion: {known:g}, or leave it out and fleetform takes the catalog's")


@rule("model-context", "error", "max_model_len is at most the model's maximum context")
def model_context(bp: Blueprint, report: Reporter) -> None:
    """vLLM refuses to start: 'User-specified max_model_len (N) is greater than the derived max_model_len
    (max_position_embeddings=M ... in model's config.json)' (vllm/config ModelConfig, _get_and_verify_max_len),
    unless VLLM_ALLOW_LONG_MAX_MODEL_LEN is set, which its own message says 'may lead to incorrect model
    outputs or CUDA errors'."""
    for fleet in _inference(bp):
        for model in fleet.models:
            spec = model.spec
            if spec is None or model.max_model_len is None:
                continue
            longest, override = derived_max_len(spec, model.extra_args)
            if model.max_model_len <= longest:
                continue
            what = (f"the {longest:,} tokens extra_args' {override} gives '{model.model}'" if override else
                    f"the {spec.max_context:,} tokens of '{model.model}' (max_position_embeddings of its config.json, "
                    f"{_catalog_source(model, 'max_context')})")
            report(model.path + ("max_model_len",),
                   f"max_model_len {model.max_model_len:,} is more than {what}: vLLM refuses to start",
                   f"use max_model_len: {longest} or less; a longer context needs a rope_scaling "
                   "override the model card documents (vLLM --hf-overrides in extra_args)")


@rule("kv-cache-fit", "error", "one sequence of max_model_len tokens (or the model's whole context where max_model_len "
      "is not set) fits the KV cache left after the weights")
def kv_cache_fit(bp: Blueprint, report: Reporter) -> None:
    """vLLM v1 refuses to start when the KV cache cannot hold one request of the longest context: 'To serve at
    least one request with the models's max seq len (131072), (16.00 GiB KV cache is needed, which is larger
    than the available KV cache memory (...)' (vllm/v1/core/kv_cache_utils.py, check_enough_kv_cache_memory;
    the 16.00 GiB is Llama-3.1-8B's 2 x 32 layers x 8 KV heads x 128 x 2 B x 131072 tokens, as this rule
    computes it). The room is what kv-cache-room counts: vLLM's budget less the weights and its overhead."""
    for fleet in _inference(bp):
        devices = fleet.devices()
        if devices is None:
            continue
        _, device_gb, device = devices
        for model in fleet.models:
            spec, tokens = model.spec, model.context_tokens
            if spec is None or tokens is None:
                continue
            usable = _usable_gb(model, device_gb)
            if model.weights_gb > usable or model.load_gb > usable:
                continue  # model-fits reports it
            dtype = kv_dtype_bytes(model)
            per_token = spec.kv_bytes_per_token(model.tensor_parallel, dtype)
            room = max(usable - model.weights_gb - model.overhead_gb, 0.0) * 1e9
            need = per_token * kv_cache_tokens(tokens)  # whole blocks, as vLLM's check counts them
            if need <= room:
                continue
            longest = int(room // per_token) // BLOCK_TOKENS * BLOCK_TOKENS
            stored = spec.kv_heads_stored(model.tensor_parallel)
            formula = (f"2 x {spec.layers} layers x {stored} KV heads x {spec.head_dim} x {dtype:g} B = "
                       f"{per_token / 1024:g} KiB a token")
            given = (f"at max_model_len {tokens:,}," if model.max_model_len is not None else
                     f"max_model_len is not set, so vLLM takes the model's {tokens:,} tokens, and")
            options = [f"set max_model_len: {longest}" if longest >= BLOCK_TOKENS else
                       "the weights leave no room for a KV cache"]
            options += [o for o in fit_options(model, fleet, tokens) if "holds it on one node" not in o]
            report(model.path + (("max_model_len",) if model.max_model_len is not None else ("model",)),
                   f"{given} one sequence needs {need / GIB:.2f} GiB of KV cache ({formula}), more than the "
                   f"{room / GIB:.2f} GiB left on {model.gpus} x {device} after {model.weights_gb * 1e9 / GIB:.2f} "
                   f"GiB of weights and {model.overhead_gb * 1e9 / GIB:.2f} GiB of vLLM overhead: vLLM refuses to start",
                   "; or ".join(options))


@rule("model-heads-tp", "error", "tensor_parallel divides the model's attention heads",
      needs=(UNIQUE_NAMES, "tensor-parallel"))  # a TP the node cannot hold is tensor-parallel's finding alone
def model_heads_tp(bp: Blueprint, report: Reporter) -> None:
    """vLLM refuses to start: 'Total number of attention heads (28) must be divisible by tensor parallel size
    (8).' (vllm/config ModelConfig.verify_with_parallel_config): each tensor-parallel GPU computes a whole
    share of the heads. The catalog knows num_attention_heads; a model it does not list is not checked."""
    for fleet in _inference(bp):
        for model in fleet.models:
            spec, tp = model.spec, model.tensor_parallel
            if spec is None or spec.attention_heads % tp == 0:
                continue
            devices = fleet.devices()
            most = devices[0] if devices is not None and fleet.gpu_sharing.strategy == "none" else tp
            choices = [d for d in range(1, max(most, 1) + 1) if spec.attention_heads % d == 0
                       and (devices is None or most % d == 0)]
            report(model.path + ("tensor_parallel",),
                   f"tensor_parallel {tp} does not divide the {spec.attention_heads} attention heads of "
                   f"'{model.model}' (num_attention_heads of its config.json): vLLM refuses to start ('Total number "
                   f"of attention heads ({spec.attention_heads}) must be divisible by tensor parallel size ({tp})')",
                   "use tensor_parallel " + " or ".join(str(d) for d in choices[-3:]) if choices else
                   "use a tensor_parallel that divides the attention heads")
