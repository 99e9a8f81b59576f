"""LoRA adapters served on a model (issue 23): what vLLM is told, what it preallocates, how replicas get them.

vLLM 0.11.0 (the pinned image line) serves adapters on a base model with --enable-lora; --lora-modules
NAME=PATH names the adapters every replica has from its start, and a request whose `model` is NAME gets the
base model with that adapter (vllm/entrypoints/openai/serving_models.py, which loads every one at start:
init_static_loras). Every figure below is read from the
vLLM 0.11.0 wheel (https://pypi.org/project/vllm/0.11.0/):

- vllm/config/lora.py LoRAConfig: max_lora_rank defaults to 16 and must be one of (8, 16, 32, 64, 128, 256,
  320, 512); max_loras defaults to 1 and must be >= 1; max_cpu_loras defaults to max_loras and must be >= it;
  lora_dtype "auto" takes the model's dtype; lora_extra_vocab_size defaults to 256.
- vllm/lora/models.py LoRAModelManager._create_lora_modules wraps EVERY module LoRA supports (every linear
  layer, plus embed_tokens and lm_head where the model class lists embedding_modules: vllm/lora/utils.py
  get_supported_lora_modules), whatever modules the adapters target, and each wrapper preallocates
  max_loras slots of max_lora_rank in GPU memory when the model loads (create_lora_weights):
  - column-parallel (qkv_proj, gate_up_proj; vllm/lora/layers/column_parallel_linear.py): per slice
    lora_a (max_loras, 1, rank, input_size) on every GPU, lora_b (max_loras, 1, output_slice / tp, rank);
  - row-parallel (o_proj, down_proj; row_parallel_linear.py, base_linear.py): lora_a (max_loras, 1, rank,
    input_size / tp), lora_b (max_loras, 1, output_size, rank) on every GPU;
  - embed_tokens (vocal_parallel_embedding.py): embeddings_tensors (max_loras, 256, hidden), lora_a
    (max_loras, vocab + 256, rank), lora_b (max_loras, 1, hidden, rank) on every GPU;
  - lm_head (logits_processor.py): lora_a (max_loras, 1, rank, hidden), lora_b (max_loras, 1, vocab padded to
    256, rank), embeddings_tensors (max_loras, 256, hidden) on every GPU.
  Summed over a decoder layer and the replica's tp GPUs that is
  rank x (7 x tp x hidden + 2 x q_out + 2 x kv_out + 3 x intermediate) elements a slot.
"""

from __future__ import annotations

import math
import re

from .records import frozen

VLLM_RANKS = (8, 16, 32, 64, 128, 256, 320, 512)
"""max_lora_rank values vLLM 0.11.0 accepts (vllm/config/lora.py LoRAConfig.__post_init__ possible_max_ranks)."""
EXTRA_VOCAB = 256  # LoRAConfig.lora_extra_vocab_size default
VOCAB_PADDING = 256  # CUDA's get_lora_vocab_padding_size (vllm/platforms/interface.py)
DEFAULT_MAX_LORAS = 4
"""fleetform's default slot count where the blueprint gives none: every adapter up to 4. vLLM's own default
is 1, which serialises a batch mixing two adapters; more slots cost GPU memory (lora_slots_bytes)."""
ADAPTERS_DIR = "/adapters"
"""Where the init container puts each adapter (ADAPTERS_DIR/NAME) and vLLM reads it."""

S3_FOLDER = re.compile(r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/([A-Za-z0-9!_.'()=+-]+/)*$")
"""The schema's s3Prefix (blueprints/fleetform-v1.schema.json): a folder, ending with '/', no wildcards."""
HUB_REPO = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
"""A Hugging Face Hub repository id ORG/NAME (huggingface_hub validate_repo_id: letters, digits, '-', '_',
'.', at most 96 characters a part, one '/')."""


@frozen
class LoraArch:
    """The model catalog's LoRA facts of a model (providers/models.json `lora`)."""

    architecture: str
    hidden_size: int
    intermediate_size: int
    vocab_size: int
    embeddings: bool  # vLLM also wraps embed_tokens and lm_head (the class lists embedding_modules)


@frozen
class Adapter:
    name: str
    source: str  # s3://bucket/prefix/ or a Hub repo id
    revision: str | None
    rank: int
    path: tuple

    @property
    def kind(self) -> str:
        return "s3" if self.source.startswith("s3://") else "hub"

    @property
    def bucket(self) -> str:
        return self.source[5:].split("/", 1)[0]

    @property
    def prefix(self) -> str:
        return self.source[5:].partition("/")[2]

    @property
    def local_path(self) -> str:
        return f"{ADAPTERS_DIR}/{self.name}"


@frozen
class Lora:
    """A model's adapters and the vLLM limits they are served under."""

    adapters: tuple[Adapter, ...]
    max_loras: int
    max_lora_rank: int
    max_cpu_loras: int | None  # None: vLLM's default (max_loras)
    path: tuple
    max_loras_given: bool = False
    max_lora_rank_given: bool = False
    max_cpu_loras_given: bool = False

    def args(self) -> list[str]:
        """The vLLM flags: --enable-lora, the limits, and one --lora-modules followed by NAME=PATH items
        (cli_args.py: lora_modules is nargs='+' with LoRAParserAction, 'name=path' each)."""
        out = ["--enable-lora", "--max-loras", str(self.max_loras), "--max-lora-rank", str(self.max_lora_rank)]
        if self.max_cpu_loras is not None:
            out += ["--max-cpu-loras", str(self.max_cpu_loras)]
        return out + ["--lora-modules"] + [f"{a.name}={a.local_path}" for a in self.adapters]


def derive(adapters: tuple[Adapter, ...], max_loras: int | None, max_lora_rank: int | None,
           max_cpu_loras: int | None, path: tuple) -> Lora:
    """The limits where the blueprint leaves them out: a slot per adapter up to DEFAULT_MAX_LORAS, the smallest
    rank vLLM accepts that holds the largest adapter, and a CPU cache for every adapter where they outnumber
    the slots (vLLM's default, max_loras, would evict and re-read adapters from disk)."""
    loras = max_loras if max_loras is not None else max(1, min(len(adapters), DEFAULT_MAX_LORAS))
    top = max((a.rank for a in adapters), default=1)
    rank = max_lora_rank if max_lora_rank is not None else next((r for r in VLLM_RANKS if r >= top), VLLM_RANKS[-1])
    cpu = max_cpu_loras if max_cpu_loras is not None else (len(adapters) if len(adapters) > loras else None)
    return Lora(adapters, loras, rank, cpu, path, max_loras is not None, max_lora_rank is not None,
                max_cpu_loras is not None)


def slot_elements(arch: LoraArch, spec, tensor_parallel: int, rank: int) -> int:
    """Elements vLLM preallocates for ONE adapter slot of `rank`, summed over the replica's GPUs (see the
    module's docstring for each tensor's shape)."""
    tp, hidden, inter = tensor_parallel, arch.hidden_size, arch.intermediate_size
    q_out = spec.attention_heads * spec.head_dim
    kv_out = spec.kv_heads_stored(tp) * spec.head_dim
    per_layer = rank * (7 * tp * hidden + 2 * q_out + 2 * kv_out + 3 * inter)
    total = spec.layers * per_layer
    if arch.embeddings:
        padded = math.ceil(arch.vocab_size / VOCAB_PADDING) * VOCAB_PADDING
        embed = EXTRA_VOCAB * hidden + (arch.vocab_size + EXTRA_VOCAB) * rank + hidden * rank
        head = rank * hidden + padded * rank + EXTRA_VOCAB * hidden
        total += tp * (embed + head)
    return total


def slots_gb(model, tensor_parallel: int | None = None) -> float:
    """GPU memory, decimal GB over the replica's GPUs (the model's tensor_parallel, or the one given), of the
    model's max_loras slots of max_lora_rank (0 without adapters or without the catalog's LoRA facts).
    lora_dtype auto is the model's dtype: 4 bytes for fp32, else 2 (a quantized model computes in 16 bits)."""
    lora, spec = model.lora, model.spec
    if lora is None or spec is None or spec.lora is None:
        return 0.0
    size = 4 if model.precision == "fp32" else 2
    tp = tensor_parallel or model.tensor_parallel
    return lora.max_loras * slot_elements(spec.lora, spec, tp, lora.max_lora_rank) * size / 1e9


FETCH_SCRIPT = (
    "import os,sys\n"
    "from huggingface_hub import snapshot_download\n"
    "for item in sys.argv[1:]:\n"
    "    name,repo,rev=item.split('|')\n"
    "    dest=os.path.join('" + ADAPTERS_DIR + "',name)\n"
    "    snapshot_download(repo_id=repo,revision=rev or None,local_dir=dest)\n"
    "    if not os.path.isfile(os.path.join(dest,'adapter_config.json')):\n"
    "        sys.exit(f'{repo}: no adapter_config.json')\n"
    "    print(f'{name}: {repo}@{rev or \"main\"}',flush=True)\n"
)
"""The Hub adapters' init container program (`python3 -c`, in the model's own vLLM image, which has
huggingface_hub as a dependency of vLLM): each argument NAME|REPO|REVISION is downloaded into
ADAPTERS_DIR/NAME; a repository without adapter_config.json (PEFT's file, which vLLM's PEFTHelper reads) fails
in the init container, which names the repository, rather than in vLLM's start."""
