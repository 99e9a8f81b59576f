"""Whether a served model fits GPUs: the arithmetic the memory rules' hints and the plan's sizing share.

Kept apart from fleetform/sizing.py so that `fleetform validate`, which runs the rules, imports no
more than it needs (sizing is the plan's)."""

from __future__ import annotations

from .model import GPU_OVERHEAD_GB

KV_CACHE_SHARE = 0.2  # the same room the kv-cache-room rule asks for

BLOCK_TOKENS = 16
"""vLLM's default KV cache block size in tokens (CacheConfig.block_size 16 on CUDA): the KV cache is handed out
in whole blocks, and vLLM's startup check counts one sequence as whole blocks too
(vllm/v1/kv_cache_interface.py FullAttentionSpec.max_memory_usage_bytes: cdiv(max_model_len, block_size) x
page_size_bytes)."""


def kv_cache_tokens(tokens: int) -> int:
    """The tokens of KV cache vLLM sets aside for a sequence of `tokens`: whole blocks."""
    return -(-tokens // BLOCK_TOKENS) * BLOCK_TOKENS


KV_DTYPE_BYTES = {"fp32": 4.0}
"""Bytes of one KV cache element: vLLM's --kv-cache-dtype auto stores it in the model's dtype, 16-bit for
every precision but fp32 (a quantized checkpoint computes in its 16-bit torch_dtype; vllm/config
CacheConfig.cache_dtype); an fp8 --kv-cache-dtype in extra_args halves it."""


def kv_dtype_bytes(model) -> float:
    """Bytes one KV cache element takes for the model as fleetform starts vLLM."""
    args = list(model.extra_args)
    for i, arg in enumerate(args):
        value = (arg.split("=", 1)[1] if arg.startswith("--kv-cache-dtype=") else
                 args[i + 1] if arg == "--kv-cache-dtype" and i + 1 < len(args) else None)
        if value is not None and value.startswith("fp8"):
            return 1.0
    return KV_DTYPE_BYTES.get(model.precision, 2.0)


def fits(model, gpu_gb: float, tp: int, tokens: int | None) -> bool:
    """Whether `tp` GPUs of `gpu_gb` hold the model: its weights (and the 16-bit copy of a checkpoint
    quantized on load), vLLM's overhead per GPU and the KV cache's share of what vLLM may use
    (smallest_tensor_parallel's test), and, for a model of the catalog, one sequence of `tokens`."""
    if model.spec is not None and model.spec.attention_heads % tp:
        return False  # vLLM refuses a tensor_parallel that does not divide the heads (model-heads-tp)
    from .lora import slots_gb

    usable = tp * gpu_gb * model.gpu_memory_utilization
    overhead = tp * GPU_OVERHEAD_GB + slots_gb(model, tp)  # LoRA adapter slots: fleetform/lora.py
    if model.weights_gb + overhead > usable * (1 - KV_CACHE_SHARE) or model.load_gb > usable:
        return False
    if model.spec is None or tokens is None:
        return True
    kv_gb = model.spec.kv_bytes_per_token(tp, kv_dtype_bytes(model)) * kv_cache_tokens(tokens) / 1e9
    return model.weights_gb + overhead + kv_gb <= usable


def instances_that_fit(model, instances, tokens: int | None) -> list[tuple[object, int]]:
    """(instance type, the smallest tensor_parallel that holds the model on it) for every instance type
    whose GPUs hold the model on one node, cheapest first (unpriced last)."""
    found = []
    for instance in instances:
        g = instance.gpu_count
        tp = next((d for d in range(1, g + 1) if g % d == 0 and fits(model, instance.gpu.memory_gb, d, tokens)), None)
        if tp is not None:
            found.append((instance, tp))
    return sorted(found, key=lambda x: (x[0].price_usd_hr is None, x[0].price_usd_hr or 0.0, x[0].name))
