"""The model catalog: open models by their Hugging Face Hub id, with the sources of their figures.

Data lives in providers/models.json (installed as fleetform.providers). `resolve` looks a blueprint's
model up here and attaches the entry to the model, so rules size the KV cache from the attention
layout and fill a missing parameter count; nothing after resolution reads the catalog again.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from importlib import resources
from types import MappingProxyType
from typing import Mapping

from .lora import LoraArch
from .records import frozen

GIB = 1024 ** 3


@frozen
class ModelSpec:
    """One open model's facts, each with its source."""

    id: str  # the Hub id, as vLLM is given it
    params_billion: float
    active_params_billion: float | None  # mixture of experts: parameters one token passes through
    max_context: int  # config.json max_position_embeddings: the longest max_model_len vLLM accepts
    gated: bool
    layers: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    sources: Mapping[str, str]
    lora: LoraArch | None = None  # vLLM 0.11's LoRA facts of the model; None where the catalog has none

    def kv_heads_stored(self, tensor_parallel: int) -> int:
        """KV heads the replica's GPUs hold together: vLLM divides the KV heads among the tensor-parallel
        GPUs and replicates one on each where there are fewer heads than GPUs (vllm/config ModelConfig.
        get_num_kv_heads: max(1, total_num_kv_heads // tensor_parallel_size), per GPU)."""
        return max(1, self.kv_heads // tensor_parallel) * tensor_parallel

    def kv_bytes_per_token(self, tensor_parallel: int, dtype_bytes: float) -> float:
        """Bytes of KV cache one token takes on the replica: a key and a value per layer and KV head,
        head_dim elements each: 2 x layers x kv_heads x head_dim x dtype bytes."""
        return 2 * self.layers * self.kv_heads_stored(tensor_parallel) * self.head_dim * dtype_bytes


UNSCALED_ROPE_TYPES = ("su", "longrope", "llama3")
"""rope_scaling types whose max_position_embeddings already is the scaled length: vLLM leaves the derived
max_model_len alone for them (vllm/config _get_and_verify_max_len)."""


def flag_value(args: tuple[str, ...], flag: str) -> str | None:
    """The value of `flag` in a vLLM argv, as `--flag VALUE` or `--flag=VALUE` (the last one wins)."""
    value = None
    for i, arg in enumerate(args):
        if arg.startswith(flag + "="):
            value = arg.split("=", 1)[1]
        elif arg == flag and i + 1 < len(args):
            value = args[i + 1]
    return value


def _json_object(text: str | None) -> dict:
    try:
        value = json.loads(text) if text is not None else None
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def derived_max_len(spec: ModelSpec, extra_args: tuple[str, ...] = ()) -> tuple[int, str | None]:
    """The longest max_model_len vLLM accepts for the model as fleetform starts it, and the override that
    made it differ from the catalog's max_context (None where none did).

    vLLM derives it from config.json after applying --hf-overrides (or the older --rope-scaling flag):
    max_position_embeddings, times a rope_scaling factor unless the type is su/longrope/llama3, and for
    yarn original_max_position_embeddings x factor (vllm/config _get_and_verify_max_len). That is how a
    model card's longer context is switched on (Qwen2.5's YaRN: factor 4 on 32,768 tokens)."""
    overrides = _json_object(flag_value(extra_args, "--hf-overrides"))
    rope = overrides.get("rope_scaling")
    flag = "--hf-overrides"
    if not isinstance(rope, dict):
        rope, flag = _json_object(flag_value(extra_args, "--rope-scaling")), "--rope-scaling"
    base = overrides.get("max_position_embeddings", spec.max_context)
    if not isinstance(base, (int, float)) or isinstance(base, bool) or base <= 0:
        base = spec.max_context
    length, source = base, ("--hf-overrides max_position_embeddings" if base != spec.max_context else None)
    rope_type = rope.get("rope_type", rope.get("type")) if rope else None
    if isinstance(rope_type, str) and rope_type not in UNSCALED_ROPE_TYPES:
        factor = rope.get("factor", 1.0)
        factor = factor if isinstance(factor, (int, float)) and not isinstance(factor, bool) and factor > 0 else 1.0
        original = rope.get("original_max_position_embeddings")
        if rope_type == "yarn" and isinstance(original, (int, float)) and not isinstance(original, bool) and original > 0:
            length = original
        length = length * factor
        source = f"{flag} rope_scaling ({rope_type}, factor {factor:g})"
    length = int(length) if math.isfinite(length) else spec.max_context
    return length, (source if length != spec.max_context else None)


@frozen
class ModelCatalog:
    models: Mapping[str, ModelSpec]
    about: str

    def find(self, hub_id: str) -> ModelSpec | None:
        return self.models.get(hub_id)


@lru_cache(maxsize=1)
def load_models() -> ModelCatalog:
    data = json.loads(resources.files("fleetform.providers").joinpath("models.json").read_text(encoding="utf-8"))
    models = {}
    for m in data["models"]:
        models[m["id"]] = ModelSpec(m["id"], m["params_billion"], m.get("active_params_billion"), m["max_context"],
                                    m["gated"], m["layers"], m["attention_heads"], m["kv_heads"], m["head_dim"],
                                    MappingProxyType(dict(m["sources"])),
                                    LoraArch(**m["lora"]) if "lora" in m else None)
    return ModelCatalog(MappingProxyType(models), data["about"])
