"""Precise prefix-cache routing (issue 23): a gateway's endpoint picker that knows which KV blocks each vLLM
replica holds, from vLLM's KV cache events, as llm-d's "precise prefix cache aware" guide runs it.

Where a fleet's `gateway.prefix_routing` is `precise`, every model of the fleet:
- runs vLLM with prefix caching on, a fixed block size and hash (CBOR + SHA-256 seeded by PYTHONHASHSEED) and
  `--kv-events-config`: a ZMQ PUB socket that connects to its endpoint picker's Service and publishes on the topic
  `kv@<pod IP>@<served model name>`;
- gets llm-d-inference-scheduler's endpoint picker (LLMD_IMAGE) instead of the extension's: its
  precise-prefix-cache-scorer binds the ZMQ SUB socket, rebuilds the replicas' block hashes from the request's
  tokens and scores each replica by the longest prefix of them it holds.

The two sides agree by construction: the block size, the hash seed and the topic come from the constants and the
model below, never from two places. Sources (each read at the tag named; llm-d-inference-scheduler v0.5.0 is the first
release whose chat requests get a prefix score and whose completions are tokenized as vLLM does, see LLMD_IMAGE):
- vLLM v0.11.0 (the pinned image's wheel, vllm-0.11.0-cp38-abi3-manylinux1_x86_64.whl): vllm/config/kv_events.py
  (KVEventsConfig), vllm/distributed/kv_events.py (ZmqEventPublisher: binds when the endpoint has `*`, `::`, ipc://
  or inproc://, else connects; sends [topic, seq, payload]), vllm/v1/core/kv_cache_utils.py (init_none_hash: the
  root hash is hash_fn(PYTHONHASHSEED); a random one without it; hash_block_tokens; _gen_lora_extra_hash_keys),
  vllm/utils/__init__.py (sha256_cbor), vllm/platforms/cuda.py (block_size defaults to 16).
- llm-d/llm-d-inference-scheduler v0.5.0: pkg/plugins/scorer/precise_prefix_cache.go (plugin type, parameters
  tokenProcessorConfig, indexerConfig and kvEventsConfig; the factory refuses a config without
  indexerConfig.tokenizersPoolConfig.modelName; a kvEventsConfig.zmqEndpoint gets a "local-subscriber" that binds it,
  the global socket mode; pods keyed by their address, the pod IP); go.mod: gateway-api-inference-extension v1.3.0
  (InferencePool inference.networking.k8s.io/v1) and llm-d-kv-cache v0.5.0 (the KV cache manager, renamed).
- llm-d/llm-d-kv-cache v0.5.0: pkg/kvevents/pool.go (Config: zmqEndpoint, topicFilter, concurrency, discoverPods;
  defaults no endpoint, kv@, 4, discoverPods true; digestEvents maps vLLM's block hashes, the engine keys, to keys it
  computes itself from the event's token_ids with TokensToKVBlockKeys, so vLLM's hash function no longer has to be
  the scorer's, but its block size does), zmq_subscriber.go (binds when not remote; the topic must be
  kv@<pod-id>@<model-name>), pkg/kvcache/kvblock/token_processor.go (blockSize, hashSeed; FNV-64a of canonical CBOR,
  root from hashSeed and the model name; chunks of blockSize tokens, no partial block), pkg/tokenization/pool.go
  (Config.modelName: one tokenizer per pool, built at start-up; processTask encodes a completion prompt with special
  tokens, as vLLM's CompletionRequest add_special_tokens=True does, and a rendered chat prompt without, as vLLM's
  ChatCompletionRequest does), pkg/tokenization/tokenizer.go (LocalTokenizerConfig.modelTokenizerMap[modelName]: the
  tokenizer.json path, read by tokenizers.FromFile; the chat template from get_or_create_tokenizer_key, which
  takes the directory of a file path: pkg/preprocessing/chat_completions/tokenizer_wrapper.py, PR #186).
"""

from __future__ import annotations

import json

from .records import frozen

LLMD_IMAGE = "ghcr.io/llm-d/llm-d-inference-scheduler:v0.5.0"
"""The endpoint picker with the precise scorer (llm-d-inference-scheduler Makefile: IMAGE_REGISTRY ghcr.io/llm-d,
the project's name; tag v0.5.0). v0.5.0 is the first release built on llm-d-kv-cache v0.5.0 (go.mod), the first whose
chat-template helper accepts a local tokenizer.json path (llm-d-kv-cache-manager#184, PR #186; v0.4.0 passed the path
to AutoTokenizer.from_pretrained, which refuses a file, so no /v1/chat/completions request got a prefix score) and
whose completions are encoded with special tokens as vLLM encodes them (v0.4.0 encoded without, so no completion of a
tokenizer that adds a begin-of-text token, Llama 3.1's, matched a block). It is built on the extension v1.3.0
(go.mod), whose InferencePool is the inference.networking.k8s.io/v1 fleetform renders, and whose runner
(pkg/epp/server/options.go, pflag) takes the flags fleetform passes (tests/data/kvevents/epp-flags.json)."""
PLUGIN_TYPE = "precise-prefix-cache-scorer"
ZMQ_PORT = 5557  # kvevents.DefaultConfig's tcp://*:5557, and vLLM KVEventsConfig.endpoint's default port
TOPIC_FILTER = "kv@"  # kvevents.DefaultConfig().TopicFilter; the subscriber splits the topic on `@` into 3 parts
CONCURRENCY = 4  # kvevents.DefaultConfig().Concurrency: workers, events of one pod always on one
BLOCK_SIZE = 16
"""Tokens per KV block, passed to vLLM as --block-size and to the scorer as blockSize: vLLM's CUDA default
(platforms/cuda.py) and the scorer's (token_processor.go defaultBlockSize), set on both sides explicitly so that
neither default can drift. The v0.5.0 scorer cuts each stored event's token_ids into blocks of its own size and pairs
them with vLLM's block hashes one to one (pool.go digestEvents; in_memory.go Add refuses a length mismatch): a
different size on one side stores no block at all, and every lookup misses."""
HASH_ALGO = "sha256_cbor"
"""vLLM's --prefix-caching-hash-algo. Since llm-d-kv-cache v0.5.0 the scorer keys blocks by its own FNV-64a hash of the
event's tokens and only maps vLLM's hashes to them (the last 8 bytes of a bytes hash, pool.go getHashAsUint64), so the
algorithm need not be the scorer's any more; sha256_cbor is kept because it is the one whose output is the same in
every process (vLLM 0.11's default `sha256` pickles), so a block's hash does not depend on which replica stored it."""
HASH_SEED = "42"
"""PYTHONHASHSEED of the vLLM pods and the scorer's hashSeed, one value as TokenProcessorConfig.HashSeed's comment at
llm-d-kv-cache v0.5.0 asks ("should be aligned with vLLM's PYTHONHASHSEED"): vLLM's root hash is
sha256_cbor(PYTHONHASHSEED) (init_none_hash; random per process without it), the scorer's FNV-64a of hashSeed. Not a
secret."""
TOKENIZERS_DIR = "/tokenizers"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
"""What the scorer reads: tokenizer.json (tokenizers.FromFile) and, for chat requests, the chat template of
tokenizer_config.json beside it (get_or_create_tokenizer_key loads the directory of the tokenizer.json path with
vLLM's get_tokenizer, llm-d-kv-cache v0.5.0 tokenizer_wrapper.py)."""
FETCH_SCRIPT = (
    "import os,sys\n"
    "from huggingface_hub import hf_hub_download\n"
    "name,repo,rev=sys.argv[1].split('|')\n"
    "dest=os.path.join('" + TOKENIZERS_DIR + "',name)\n"
    "for f in sys.argv[2:]:\n"
    "    hf_hub_download(repo_id=repo,filename=f,revision=rev or None,local_dir=dest)\n"
    "    if not os.path.isfile(os.path.join(dest,f)):\n"
    "        sys.exit(f'{repo}: no {f}')\n"
    "print(f'{name}: {repo}@{rev or \"main\"}',flush=True)\n"
)
"""The endpoint picker's init container program (`python3 -c SCRIPT NAME|REPO|REVISION FILE...`, in the picker's own
image, LLMD_IMAGE: its Dockerfile.epp at v0.5.0 links /usr/bin/python3 to python3.12 and puts a venv with the vLLM
0.14.0 CPU wheel (for the chat template helper's vllm.transformers_utils.tokenizer.get_tokenizer), hence transformers
and huggingface_hub, on its PYTHONPATH; the node pulls that image for the picker anyway, where the model's vLLM image, about 12 GB, would be pulled onto a system
node only for this): the model's tokenizer files at the revision vLLM serves, into
TOKENIZERS_DIR/NAME, with the model's Hub token where it has one (HF_TOKEN_PATH). tests/test_kvevents.py runs it."""


@frozen
class Precise:
    """One model's KV events: what vLLM publishes and what its endpoint picker subscribes to."""

    model: str  # the served model name: the request's `model`, the topic's last part, the tokenizer's key
    endpoint: str  # where vLLM's PUB socket connects: the picker's Service
    repo: str  # the model's Hub repository (the tokenizer)
    revision: str  # "" = the Hub's main
    hf_token_secret: str | None
    block_size: int = BLOCK_SIZE
    hash_algo: str = HASH_ALGO
    hash_seed: str = HASH_SEED
    port: int = ZMQ_PORT
    topic_filter: str = TOPIC_FILTER
    concurrency: int = CONCURRENCY
    image: str = LLMD_IMAGE  # the init container's: the picker's own (FETCH_SCRIPT)
    tokenizers_dir: str = TOKENIZERS_DIR
    fetch_script: str = FETCH_SCRIPT
    tokenizer_files: tuple[str, ...] = TOKENIZER_FILES
    fetch_cpu: str = "1"  # the init container's request and limit (a choice: two small files from the Hub)
    fetch_memory: str = "1Gi"
    tokenizers_size: str = "1Gi"  # the tokenizers emptyDir (a tokenizer.json is a few MB; Llama 3.1's 9 MB)
    tmp_size: str = "1Gi"  # the init container's /tmp: HOME and huggingface_hub's cache

    @property
    def topic(self) -> str:
        """vLLM's topic: Kubernetes expands $(POD_IP) in a container's args from its env (POD_IP = status.podIP;
        kubernetes.io/docs/tasks/inject-data-application/define-command-argument-container, "Use environment
        variables to define arguments"), the address the picker keys replicas by (the extension v1.2.0's datastore:
        Address = pod.Status.PodIP). llm-d's guide passes the same topic through a shell instead."""
        return f"kv@$(POD_IP)@{self.model}"

    @property
    def kv_events_config(self) -> str:
        """vLLM's --kv-events-config: KVEventsConfig's fields (vllm/config/kv_events.py at v0.11.0)."""
        return json.dumps({"enable_kv_cache_events": True, "publisher": "zmq", "endpoint": self.endpoint,
                           "topic": self.topic}, separators=(",", ":"))

    @property
    def vllm_args(self) -> tuple[str, ...]:
        return ("--enable-prefix-caching", "--block-size", str(self.block_size),
                "--prefix-caching-hash-algo", self.hash_algo, "--kv-events-config", self.kv_events_config)

    @property
    def tokenizer_path(self) -> str:
        return f"{self.tokenizers_dir}/{self.model}/tokenizer.json"

    @property
    def fetch_args(self) -> tuple[str, ...]:
        return (f"{self.model}|{self.repo}|{self.revision}",) + self.tokenizer_files

    @property
    def scorer_parameters(self) -> dict:
        """The precise scorer's parameters (PrecisePrefixCachePluginConfig at v0.5.0): blocks of vLLM's size and
        seed (tokenProcessorConfig, moved out of indexerConfig at v0.5.0), tokens of the model's own tokenizer files
        under the served name (tokenizersPoolConfig.modelName, required since v0.5.0, is the key of
        modelTokenizerMap), events from vLLM's topic. The Hub tokenizer is off: it would look the served name up as a
        Hub repository. discoverPods is off: vLLM's PUB socket connects to the picker's zmqEndpoint (the global
        socket mode); pod discovery would also connect a SUB socket to <pod IP>:5557 on every replica, where nothing
        listens."""
        return {
            "tokenProcessorConfig": {"blockSize": self.block_size, "hashSeed": self.hash_seed},
            "indexerConfig": {
                "tokenizersPoolConfig": {"modelName": self.model,
                                         "local": {"modelTokenizerMap": {self.model: self.tokenizer_path}},
                                         "hf": {"enabled": False}},
            },
            "kvEventsConfig": {"zmqEndpoint": f"tcp://*:{self.port}", "topicFilter": self.topic_filter,
                               "concurrency": self.concurrency, "discoverPods": False},
        }


def precise(fleet) -> bool:
    return fleet.gateway is not None and fleet.gateway.prefix_routing == "precise"


def epp_name(model_name: str) -> str:
    """The endpoint picker's Deployment and Service (fleetform/gateway.py build names it so)."""
    return f"{model_name}-epp"


def build(fleet, model, namespace: str) -> Precise | None:
    """The KV events of one model of a fleet whose gateway routes by precise prefix."""
    if not precise(fleet):
        return None
    weights = model.weights
    revision = weights.revision if weights is not None and weights.source == "hub" and weights.revision else ""
    endpoint = f"tcp://{epp_name(model.name)}.{namespace}.svc.cluster.local:{ZMQ_PORT}"
    return Precise(model.name, endpoint, model.model, revision or "", model.hf_token_secret)


SCORER_WEIGHTS = ((PLUGIN_TYPE, 2), ("kv-cache-utilization-scorer", 1), ("queue-scorer", 1))
"""The scheduling profile of llm-d-inference-scheduler's precise sample at v0.5.0
(deploy/config/epp-precise-prefix-cache-config.yaml): the precise scorer counts twice the load scorers, and the
highest total wins (max-score-picker). Integers: the extension's SchedulingPlugin.weight is a *int
(apix/config/v1alpha1/endpointpickerconfig_types.go at v1.3.0). Its decode-filter is left out: it keeps pods labelled for disaggregated
decode (llm-d.ai/role), which fleetform's pods are not."""
def picker_config(events: Precise) -> str:
    """The EndpointPickerConfig of a model's llm-d picker: the API of the extension v1.3.0's config loader
    (apiVersion inference.networking.x-k8s.io/v1alpha1, kind EndpointPickerConfig, plugins with type and parameters,
    schedulingProfiles of pluginRef and weight), the profile handler and picker named as the extension registers them
    (single_profile_handler.go, max_score_picker.go)."""
    import yaml

    plugins = [{"type": "single-profile-handler"}]
    plugins += [{"type": t, "parameters": events.scorer_parameters} if t == PLUGIN_TYPE else {"type": t}
                for t, _ in SCORER_WEIGHTS]
    plugins.append({"type": "max-score-picker"})
    profile = [{"pluginRef": t, "weight": w} for t, w in SCORER_WEIGHTS] + [{"pluginRef": "max-score-picker"}]
    return yaml.safe_dump({"apiVersion": "inference.networking.x-k8s.io/v1alpha1", "kind": "EndpointPickerConfig",
                           "plugins": plugins, "schedulingProfiles": [{"name": "default", "plugins": profile}]},
                          sort_keys=False, default_flow_style=False)


def routing_step(fleet) -> tuple[str, str]:
    """The plan's sizing line of how a gateway's picker places a model's requests: (how, what)."""
    if precise(fleet):
        weights = " + ".join(f"{t} x{w}" for t, w in SCORER_WEIGHTS)
        return (f"vLLM KV cache events (blocks of {BLOCK_SIZE} tokens, {HASH_ALGO}) over ZMQ :{ZMQ_PORT} to "
                f"{LLMD_IMAGE.rsplit('/', 1)[1]}: {weights}", "precise prefix")
    return ("the Inference Extension v1.1.0 picker's prefix-cache-scorer, from the prompts it routed + "
            "kv-cache-utilization-scorer + queue-scorer", "approximate prefix")
