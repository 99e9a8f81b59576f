"""Rules over a model's LoRA adapters (fleetform/lora.py): their sources, their ranks against the slots vLLM
preallocates, vLLM's own limits, and the names a request picks them by. vLLM 0.11.0 is the judge of each
(the wheel's vllm/config/lora.py, vllm/lora/peft_helper.py); the memory the slots take is counted by the
memory rules (model.overhead_gb: kv-cache-room, kv-cache-fit)."""

from __future__ import annotations

from ..lora import HUB_REPO, S3_FOLDER, slots_gb
from ..model import Blueprint
from . import Reporter, rule


def _served(bp: Blueprint):
    for fleet in bp.fleets:
        if fleet.training:
            continue
        for model in fleet.models:
            if model.lora is not None:
                yield fleet, model


@rule("lora-source", "error", "an adapter's source is an S3 folder s3://BUCKET/PREFIX/ (on AWS) or a Hugging Face "
      "repository id ORG/NAME, and only a Hub adapter names a revision")
def lora_source(bp: Blueprint, report: Reporter) -> None:
    """The init containers hand the source to `aws s3 sync` or huggingface_hub's snapshot_download: anything else
    fails every replica's start (a Hub id that is not ORG/NAME is refused by huggingface_hub validate_repo_id; an
    S3 location that is not a folder would be granted as a key prefix reaching its neighbours)."""
    for _, model in _served(bp):
        for adapter in model.lora.adapters:
            source = adapter.source
            if source.startswith("s3://"):
                if not S3_FOLDER.match(source):
                    report(adapter.path + ("source",),
                           f"adapter '{adapter.name}': '{source}' is not an S3 folder (s3://BUCKET/PREFIX/ with a valid "
                           "bucket name, ending with '/', no * or ?)",
                           "write the folder holding adapter_config.json and adapter_model.safetensors, ending with '/'")
                elif adapter.revision is not None:
                    report(adapter.path + ("revision",),
                           f"adapter '{adapter.name}' comes from S3, which has no revisions",
                           "remove revision, or put each version of the adapter in its own folder")
                if bp.cloud != "aws":
                    # the init container's `aws s3 sync` reads the pod's EKS Pod Identity (k8s.py adapter_fetchers);
                    # elsewhere it finds no credentials and every replica stays in Init:CrashLoopBackOff
                    report(adapter.path + ("source",),
                           f"adapter '{adapter.name}' comes from S3, which the init container reads with EKS Pod "
                           f"Identity, and this blueprint's provider is {bp.cloud}",
                           "serve the adapter from the Hugging Face Hub (ORG/NAME with a revision) on this provider")
            elif "://" in source or not HUB_REPO.match(source):
                report(adapter.path + ("source",),
                       f"adapter '{adapter.name}': '{source}' is neither an S3 folder nor a Hugging Face repository id",
                       "use s3://BUCKET/PREFIX/ or ORG/NAME (the Hub repository, with revision: COMMIT)")


@rule("lora-rank", "error", "every adapter's rank is at most max_lora_rank")
def lora_rank(bp: Blueprint, report: Reporter) -> None:
    """vLLM sizes every GPU slot for max_lora_rank and refuses a larger adapter when it loads it: 'LoRA rank 64
    is greater than max_lora_rank 16.' (vllm/lora/peft_helper.py PEFTHelper.validate_legal). It loads every
    adapter of --lora-modules at start and raises on the first that fails (vllm/entrypoints/openai/
    serving_models.py init_static_loras, called by api_server.py init_app_state), so the server does not start."""
    for _, model in _served(bp):
        lora = model.lora
        for adapter in lora.adapters:
            if adapter.rank > lora.max_lora_rank:
                report(adapter.path + ("rank",),
                       f"adapter '{adapter.name}' has rank {adapter.rank}, more than max_lora_rank {lora.max_lora_rank}: "
                       f"vLLM loads it at start and refuses to start ('LoRA rank {adapter.rank} is greater than max_lora_rank "
                       f"{lora.max_lora_rank}.')",
                       "raise max_lora_rank (or leave it out: fleetform takes the smallest vLLM accepts), or use an "
                       "adapter trained with a smaller rank")


@rule("lora-cpu-loras", "error", "max_cpu_loras is at least max_loras")
def lora_cpu_loras(bp: Blueprint, report: Reporter) -> None:
    """vLLM refuses to start with max_cpu_loras below max_loras ('max_cpu_loras (1) must be >= max_loras (2)',
    vllm/config/lora.py LoRAConfig.__post_init__)."""
    for _, model in _served(bp):
        lora = model.lora
        if lora.max_cpu_loras is not None and lora.max_cpu_loras < lora.max_loras:
            report(model.path + ("max_cpu_loras",),
                   f"max_cpu_loras {lora.max_cpu_loras} is less than max_loras {lora.max_loras}: vLLM refuses to start "
                   f"('max_cpu_loras ({lora.max_cpu_loras}) must be >= max_loras ({lora.max_loras})')",
                   f"set max_cpu_loras: {max(lora.max_loras, len(lora.adapters))}, or leave it out")


@rule("lora-cpu-cache", "warning", "max_cpu_loras holds every adapter of the model")
def lora_cpu_cache(bp: Blueprint, report: Reporter) -> None:
    """With fewer CPU slots than adapters vLLM starts, but its LRU cache (vllm/lora/models.py
    LRUCacheLoRAModelManager, capacity max_cpu_loras) evicts adapters, and a request for an evicted one waits
    while it is read from disk again. fleetform's default holds them all; only a given max_cpu_loras can be short."""
    for _, model in _served(bp):
        lora = model.lora
        if lora.max_cpu_loras is not None and lora.max_loras <= lora.max_cpu_loras < len(lora.adapters):
            report(model.path + ("max_cpu_loras",),
                   f"model '{model.name}' has {len(lora.adapters)} adapters but max_cpu_loras {lora.max_cpu_loras}: "
                   "vLLM's CPU cache evicts the least recently used, and a request for one waits for it to be read "
                   "from disk again", f"set max_cpu_loras: {len(lora.adapters)}, or leave it out")


@rule("lora-unsized", "warning", "the GPU memory of a model's adapter slots is known (the model catalog has its "
      "LoRA figures)")
def lora_unsized(bp: Blueprint, report: Reporter) -> None:
    """Every model the catalog lists is of a vLLM 0.11 class that implements SupportsLoRA (LlamaForCausalLM,
    Qwen2ForCausalLM, Qwen3ForCausalLM, MixtralForCausalLM), so no rule refuses a catalog model's adapters; a
    model outside the catalog may be of a class without it, which vLLM refuses at start ('... does not support
    LoRA yet', vllm/v1/worker/lora_model_runner_mixin.py), and its slots are not counted: this warning says so."""
    for _, model in _served(bp):
        spec = model.spec
        if spec is None or spec.lora is None:
            report(model.path + ("adapters",),
                   f"the model catalog has no architecture figures (hidden and intermediate size, vocabulary) for "
                   f"'{model.model}': the {model.lora.max_loras} adapter slots of rank {model.lora.max_lora_rank} "
                   "vLLM preallocates are not counted in the memory rules",
                   "leave room for them (a lower gpu_memory_utilization share for the KV cache), or add the model's "
                   "figures to providers/models.json with their source")


@rule("lora-names", "error", "an adapter's name is unique in its fleet, among the models and the other adapters")
def lora_names(bp: Blueprint, report: Reporter) -> None:
    """A request picks a model or an adapter by the same `model` field: vLLM answers the adapter for its name
    (--lora-modules NAME=PATH), and the gateway's route matches the same name to one pool. Two of one name
    make one of them unreachable."""
    for fleet in bp.fleets:
        if fleet.training:
            continue
        seen = {m.name: f"model '{m.name}'" for m in fleet.models}
        for model in fleet.models:
            for adapter in model.lora.adapters if model.lora is not None else ():
                if adapter.name in seen:
                    report(adapter.path + ("name",),
                           f"adapter '{adapter.name}' of model '{model.name}' has the name of {seen[adapter.name]}: "
                           "a request for it reaches only one of them",
                           "give the adapter a name of its own in the fleet")
                else:
                    seen[adapter.name] = f"adapter '{adapter.name}' of model '{model.name}'"


def slot_note(model) -> str:
    """What the model's adapter slots take, for messages and the plan ('' without adapters)."""
    gb = slots_gb(model)
    if model.lora is None or gb == 0:
        return ""
    return (f"{model.lora.max_loras} LoRA slots of rank {model.lora.max_lora_rank} take {gb:.2f} GB "
            f"over {model.tensor_parallel} GPU(s)")
