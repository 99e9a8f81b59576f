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
model below, never from two places. Sources (each read at the tag named):
- vLLM v0.11.0 (the pinned image's wheel, vllm-0.11.0-cp38-abi3-manylinux1_x86_64.whl): vllm/config/kv_events.py
  (KVEventsConfig), vllm/distributed/kv_events.py (ZmqEventPublisher: binds when the endpoint has `*`, `::`, ipc://
  or inproc://, else connects; sends [topic, seq, payload]), vllm/v1/core/kv_cache_utils.py (init_none_hash: the
  root hash is hash_fn(PYTHONHASHSEED); a random one without it; hash_block_tokens; _gen_lora_extra_hash_keys),
  vllm/utils/__init__.py (sha256_cbor), vllm/platforms/cuda.py (block_size defaults to 16).
- llm-d/llm-d-inference-scheduler v0.4.0: pkg/plugins/scorer/precise_prefix_cache.go (plugin type, parameters
  indexerConfig and kvEventsConfig, pods keyed by their address, the pod IP); go.mod: gateway-api-inference-extension
  v1.2.0 (InferencePool inference.networking.k8s.io/v1) and llm-d-kv-cache-manager v0.4.0.
- llm-d/llm-d-kv-cache-manager v0.4.0: pkg/kvcache/kvevents/pool.go (Config: zmqEndpoint, topicFilter, concurrency;
  defaults tcp://*:5557, kv@, 4), zmq_subscriber.go (the SUB socket binds; the topic must be
  kv@<pod-id>@<model-name>), pkg/kvcache/kvblock/token_processor.go (blockSize, hashSeed; CBOR canonical + SHA-256,
  root = sha256(cbor(hashSeed)), no extra keys), pkg/tokenization/tokenizer.go (the tokenizer is looked up by the
  request's model name: LocalTokenizerConfig.modelTokenizerMap, or the Hub by that name).
"""

from __future__ import annotations

import json

from .records import frozen

LLMD_IMAGE = "ghcr.io/llm-d/llm-d-inference-scheduler:v0.4.0"
"""The endpoint picker with the precise scorer (llm-d-inference-scheduler Makefile: IMAGE_REGISTRY ghcr.io/llm-d,
the project's name; tag v0.4.0). v0.4.0 is built on the extension v1.2.0 (go.mod), whose InferencePool is the
inference.networking.k8s.io/v1 fleetform renders, and whose runner takes the same flags as v1.1.0's picker
(cmd/epp/runner/runner.go: --pool-name, --pool-namespace, --config-file, --tracing, --metrics-endpoint-auth).
The v0.3 line (extension v1.0.0) finds a tokenizer only on the Hub under the request's model name, which is
fleetform's served name (`llama-8b`), not a Hub repository."""
PLUGIN_TYPE = "precise-prefix-cache-scorer"
ZMQ_PORT = 5557  # kvevents.DefaultConfig's tcp://*:5557, and vLLM KVEventsConfig.endpoint's default port
TOPIC_FILTER = "kv@"  # kvevents.DefaultConfig().TopicFilter; the subscriber splits the topic on `@` into 3 parts
CONCURRENCY = 4  # kvevents.DefaultConfig().Concurrency: workers, events of one pod always on one
BLOCK_SIZE = 16
"""Tokens per KV block, passed to vLLM as --block-size and to the scorer as blockSize: vLLM's CUDA default
(platforms/cuda.py) and the scorer's (token_processor.go defaultBlockSize), set on both sides explicitly so that
neither default can drift. A different size on one side makes every block hash differ: every lookup misses."""
HASH_ALGO = "sha256_cbor"
"""vLLM's --prefix-caching-hash-algo: the scorer hashes a block as SHA-256 of canonical CBOR of (parent, tokens,
None) (token_processor.go hash), which is vLLM's sha256_cbor; vLLM 0.11's default `sha256` pickles instead."""
HASH_SEED = "42"
"""PYTHONHASHSEED of the vLLM pods and the scorer's hashSeed: vLLM's root hash is sha256_cbor(PYTHONHASHSEED)
(init_none_hash; random per process without it), the scorer's sha256(cbor(hashSeed)). Not a secret."""
TOKENIZERS_DIR = "/tokenizers"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
"""What the scorer reads: tokenizer.json (tokenizers.FromFile) and, for chat requests, the chat template of
tokenizer_config.json beside it (getFetchChatTemplateRequest passes the file's path)."""
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
image, LLMD_IMAGE: its Dockerfile.epp at v0.4.0 links /usr/bin/python3 to python3.12 and pip-installs the KV cache
manager's chat-template requirements, transformers>=4.53.0, which requires huggingface_hub, onto its PYTHONPATH; the
node pulls that image for the picker anyway, where the model's vLLM image, about 12 GB, would be pulled onto a system
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
        """The precise scorer's parameters (PrecisePrefixCachePluginConfig at v0.4.0): tokens of the model's own
        tokenizer files, blocks of vLLM's size and seed, events from vLLM's topic. The Hub tokenizer is off: it
        would look the served name up as a Hub repository."""
        return {
            "indexerConfig": {
                "tokenProcessorConfig": {"blockSize": self.block_size, "hashSeed": self.hash_seed},
                "tokenizersPoolConfig": {"local": {"modelTokenizerMap": {self.model: self.tokenizer_path}},
                                         "hf": {"enabled": False}},
            },
            "kvEventsConfig": {"zmqEndpoint": f"tcp://*:{self.port}", "topicFilter": self.topic_filter,
                               "concurrency": self.concurrency},
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
"""The scheduling profile of llm-d-inference-scheduler's precise sample at v0.4.0
(deploy/config/epp-precise-prefix-cache-config.yaml): the precise scorer counts twice the load scorers, and the
highest total wins (max-score-picker). Integers: the extension's SchedulingPlugin.weight is a *int
(apix/config/v1alpha1/endpointpickerconfig_types.go at v1.2.0). Its decode-filter is left out: it keeps pods labelled for disaggregated
decode (llm-d.ai/role), which fleetform's pods are not."""
def picker_config(events: Precise) -> str:
    """The EndpointPickerConfig of a model's llm-d picker: the API of the extension v1.2.0's config loader
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
