"""The model catalog: open models by their Hugging Face Hub id, with the sources of their figures.

Data lives in providers/models.json (installed as fleetform.providers). `resolve` looks a blueprint's
model up here and attaches the entry to the model, so rules size the KV cache from the attention
layout and fill a missing parameter count; nothing after resolution reads the catalog again.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from types import MappingProxyType
from typing import Mapping

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

    def kv_heads_stored(self, tensor_parallel: int) -> int:
        """KV heads the replica's GPUs hold together: vLLM divides the KV heads among the tensor-parallel
        GPUs and replicates one on each where there are fewer heads than GPUs (vllm/config ModelConfig.
        get_num_kv_heads: max(1, total_num_kv_heads // tensor_parallel_size), per GPU)."""
        return max(1, self.kv_heads // tensor_parallel) * tensor_parallel

    def kv_bytes_per_token(self, tensor_parallel: int, dtype_bytes: float) -> float:
        """Bytes of KV cache one token takes on the replica: a key and a value per layer and KV head,
        head_dim elements each: 2 x layers x kv_heads x head_dim x dtype bytes."""
        return 2 * self.layers * self.kv_heads_stored(tensor_parallel) * self.head_dim * dtype_bytes


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
                                    MappingProxyType(dict(m["sources"])))
    return ModelCatalog(MappingProxyType(models), data["about"])
