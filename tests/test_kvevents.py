"""Precise prefix-cache routing (fleetform/kvevents.py, blueprints/inference-precise.yaml): vLLM's flags are the
pinned vLLM's, its --kv-events-config holds only KVEventsConfig's fields (tests/data/kvevents, from the 0.11.0 wheel),
the picker's config only keys and plugin types of llm-d-inference-scheduler v0.5.0 and the structs it decodes into
(extracted from the sources at their tags), and both sides agree on what makes a block hash and where the events go.

What only a GPU cluster proves: that a request lands on the replica that holds its prefix's blocks (vLLM's hashes of
a real prompt equal the scorer's, the chat template renders alike on both sides, the events arrive). Checked here
instead: every input of those hashes (block size, hash function, seed, tokenizer revision) comes from one value on
both sides, and the topic and endpoint are what the subscriber's source parses."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import yaml

from conftest import ROOT, assert_render_check_sees, check_text, rule_findings
from fleetform import kvevents
from fleetform.rules.inference import vllm_flags
from test_gateway import _objects
from test_k8s import _restricted_violations

EXAMPLE = ROOT / "blueprints/inference-precise.yaml"
GATEWAY = ROOT / "blueprints/inference-gateway.yaml"
KEYS = json.loads((ROOT / "tests/data/kvevents/picker-keys-v0.5.0.json").read_text())
VLLM = json.loads((ROOT / "tests/data/kvevents/vllm-0.11.0-kv-events-config.json").read_text())
MODELS = ("qwen-7b", "llama-8b")


def _server(objs, name):
    return objs["Deployment"][name]["spec"]["template"]["spec"]["containers"][0]


def _arg(args, flag):
    return args[args.index(flag) + 1]


def _config(objs, model):
    (text,) = objs["ConfigMap"][f"{model}-epp"]["data"].values()
    return yaml.safe_load(text)


def _plugin(config, type_):
    (plugin,) = [p for p in config["plugins"] if p["type"] == type_]
    return plugin


def unknown_keys(value, type_: str, where: str = "") -> list[str]:
    """Keys of `value` that the Go struct `type_` (package-qualified) does not decode, at any depth; a value whose
    Go type is not one of the extracted structs (a map, a scalar, json.RawMessage) is not walked."""
    base = type_.lstrip("*[]")
    if type_.startswith("[]"):
        return [k for i, item in enumerate(value) for k in unknown_keys(item, type_[2:], f"{where}[{i}]")]
    if base not in KEYS["structs"]:
        return []
    fields = KEYS["structs"][base]
    out = []
    for key, item in value.items():
        if key not in fields:
            out.append(f"{where}.{key}")
        else:
            out += unknown_keys(item, fields[key], f"{where}.{key}")
    return out


def _bp(text: str, **model_fields) -> str:
    """The example with fields added to its first model."""
    extra = "".join(f"\n        {k}: {v}" for k, v in model_fields.items())
    return text.replace("        model: Qwen/Qwen2.5-7B-Instruct", "        model: Qwen/Qwen2.5-7B-Instruct" + extra, 1)


def test_approximate_is_the_default_and_renders_as_before(tmp_path):
    """A gateway without prefix_routing, and one that says approximate, render the same files: the extension's
    picker with the chart's default plugins (tests/test_gateway.py holds those to the chart), no KV events."""
    _, files, objs = _objects(GATEWAY)
    said = GATEWAY.read_text().replace("      request_timeout_s: 300", "      request_timeout_s: 300\n"
                                       "      prefix_routing: approximate", 1)
    assert said != GATEWAY.read_text()
    path = tmp_path / "inference-gateway.yaml"
    path.write_text(said)
    _, files_said, _ = _objects(path)
    assert {k: v for k, v in files_said.items() if k != "manifest.json"} == \
        {k: v for k, v in files.items() if k != "manifest.json"}
    for name in ("qwen-7b", "llama-8b"):
        args = _server(objs, name)["args"]
        assert not {"--kv-events-config", "--block-size", "--prefix-caching-hash-algo"} & set(args)
        assert _server(objs, f"{name}-epp")["image"] == "registry.k8s.io/gateway-api-inference-extension/epp:v1.1.0"


def test_vllm_gets_pinned_flags_and_a_kv_events_config_of_its_own_fields():
    known = vllm_flags()
    _, _, objs = _objects(EXAMPLE)
    assert VLLM["source"].startswith("vllm 0.11.0 wheel")
    for model in MODELS:
        container = _server(objs, model)
        args = container["args"]
        assert [a for a in args if a.startswith("-") and a not in known] == []
        assert "--enable-prefix-caching" in args and "--no-enable-prefix-caching" not in args
        config = json.loads(_arg(args, "--kv-events-config"))
        assert set(config) <= set(VLLM["fields"]), set(config) - set(VLLM["fields"])
        types = {"bool": bool, "str": str, "int": int}
        assert all(isinstance(v, types[VLLM["fields"][k]["type"]]) for k, v in config.items())
        assert config["enable_kv_cache_events"] is True and config["publisher"] == "zmq"
        # vLLM binds only an endpoint with `*`, `::`, ipc:// or inproc://; this one it connects to: the picker's Service
        assert not re.search(r"\*|::|^ipc://|^inproc://", config["endpoint"])
        host, port = re.fullmatch(r"tcp://([a-z0-9.-]+):(\d+)", config["endpoint"]).groups()
        service = objs["Service"][f"{model}-epp"]
        assert host == f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc.cluster.local"
        assert {"name": "zmq", "protocol": "TCP", "port": int(port)} in service["spec"]["ports"]
        # the topic is kv@<pod IP>@<served name>: Kubernetes expands $(POD_IP) in args from the container's env
        assert config["topic"] == f"kv@$(POD_IP)@{_arg(args, '--served-model-name')}" == f"kv@$(POD_IP)@{model}"
        env = {e["name"]: e for e in container["env"]}
        assert env["POD_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}


def test_the_topic_is_what_the_subscriber_parses_and_keys_by_the_pools_address():
    """zmq_subscriber.go (llm-d-kv-cache v0.5.0) subscribes to topicFilter and splits the topic on `@` into
    exactly kv, the pod identifier and the model; the scorer keys pods by their address (the pod IP) and looks
    blocks up under the request's model, which the served name is."""
    _, _, objs = _objects(EXAMPLE)
    for model in MODELS:
        args = _server(objs, model)["args"]
        topic = json.loads(_arg(args, "--kv-events-config"))["topic"].replace("$(POD_IP)", "10.72.3.17")
        events = _plugin(_config(objs, model), kvevents.PLUGIN_TYPE)["parameters"]["kvEventsConfig"]
        assert topic.startswith(events["topicFilter"])
        assert topic.split("@") == ["kv", "10.72.3.17", model]
        assert events["zmqEndpoint"] == f"tcp://*:{kvevents.ZMQ_PORT}"  # the subscriber binds (sub.Bind)
        # vLLM connects to the picker (global socket mode): no per-pod subscriber connecting to <pod IP>:5557,
        # which kvevents.DefaultConfig() at v0.5.0 turns on (DiscoverPods: true)
        assert events["discoverPods"] is False


def test_block_size_hash_and_seed_are_the_same_on_both_sides():
    """A block size that differs stores no block (the scorer pairs its keys of an event's tokens with vLLM's hashes
    one to one); the hash function and the seed are one value on both sides as well."""
    _, _, objs = _objects(EXAMPLE)
    for model in MODELS:
        container = _server(objs, model)
        args = container["args"]
        # PrecisePrefixCachePluginConfig.tokenProcessorConfig: beside indexerConfig since v0.5.0 (kvcache.Config
        # no longer has the key: tests/data/kvevents/picker-keys-v0.5.0.json)
        processor = _plugin(_config(objs, model), kvevents.PLUGIN_TYPE)["parameters"]["tokenProcessorConfig"]
        assert int(_arg(args, "--block-size")) == processor["blockSize"] == 16
        assert _arg(args, "--prefix-caching-hash-algo") == "sha256_cbor"  # the scorer's CBOR + SHA-256
        assert {e["name"]: e.get("value") for e in container["env"]}["PYTHONHASHSEED"] == processor["hashSeed"]
        assert isinstance(processor["hashSeed"], str)  # TokenProcessorConfig.HashSeed is a Go string


def test_the_picker_config_has_only_the_releases_keys_and_plugins():
    assert KEYS["source"][0].startswith("sigs.k8s.io/gateway-api-inference-extension v1.3.0")
    assert any(s.startswith("github.com/llm-d/llm-d-inference-scheduler v0.5.0") for s in KEYS["source"])
    assert any(s.startswith("github.com/llm-d/llm-d-kv-cache v0.5.0") for s in KEYS["source"])
    assert kvevents.LLMD_IMAGE.endswith(":v0.5.0")
    _, _, objs = _objects(EXAMPLE)
    for model in MODELS:
        config = _config(objs, model)
        assert config["apiVersion"] == "inference.networking.x-k8s.io/v1alpha1"
        assert config["kind"] == "EndpointPickerConfig"
        body = {k: v for k, v in config.items() if k not in ("apiVersion", "kind")}
        assert unknown_keys(body, "v1alpha1.EndpointPickerConfig") == []
        assert {p["type"] for p in config["plugins"]} <= set(KEYS["plugin_types"])
        refs = [p["pluginRef"] for prof in config["schedulingProfiles"] for p in prof["plugins"]]
        assert set(refs) <= {p["type"] for p in config["plugins"]}
        # SchedulingPlugin.weight is a *int
        assert all(isinstance(p.get("weight", 1), int) for prof in config["schedulingProfiles"]
                   for p in prof["plugins"])
        parameters = _plugin(config, kvevents.PLUGIN_TYPE)["parameters"]
        assert unknown_keys(parameters, "scorer.PrecisePrefixCachePluginConfig") == []
        # the tokenizer is looked up under the request's model (the served name), in the files the init container wrote
        pool = parameters["indexerConfig"]["tokenizersPoolConfig"]
        # v0.5.0's factory refuses a config without modelName; the pool's one tokenizer is modelTokenizerMap's entry
        # of that name (tokenizer.go localTokenizerProvider.get)
        assert pool["modelName"] == model
        assert pool["local"]["modelTokenizerMap"] == {model: f"/tokenizers/{model}/tokenizer.json"}
        assert pool["hf"] == {"enabled": False}
        picker = objs["Deployment"][f"{model}-epp"]["spec"]["template"]["spec"]
        assert picker["containers"][0]["image"] == "ghcr.io/llm-d/llm-d-inference-scheduler:v0.5.0"
        assert {"name": "tokenizers", "mountPath": "/tokenizers", "readOnly": True} in picker["containers"][0][
            "volumeMounts"]
    # the walker catches a key the release does not decode, at any depth (negative controls)
    broken = json.loads(json.dumps(parameters))
    broken["tokenProcessorConfig"]["blocksize"] = 16
    broken["kvEventsConfig"]["endpoint"] = "tcp://*:5557"
    broken["indexerConfig"]["tokenizersPoolConfig"]["local"]["modelTokenizer"] = {}
    broken["indexerConfig"]["tokenProcessorConfig"] = {"blockSize": 16}  # where v0.4.0 had it
    assert unknown_keys(broken, "scorer.PrecisePrefixCachePluginConfig") == [
        ".tokenProcessorConfig.blocksize", ".indexerConfig.tokenizersPoolConfig.local.modelTokenizer",
        ".indexerConfig.tokenProcessorConfig", ".kvEventsConfig.endpoint"]


def test_the_pinned_picker_tokenizes_requests_as_vllm_does():
    """The scorer's tokens of a request must be vLLM's, or no block matches: the pinned release's KV cache library
    (its tokenization facts read from its source by extract_keys.py) adds special tokens to a completion's prompt
    and not to a rendered chat prompt, as vLLM 0.11.0's request defaults do, and renders a chat template from the
    local tokenizer.json path fleetform maps. llm-d-inference-scheduler v0.4.0 (llm-d-kv-cache-manager v0.4.0) did
    neither: its keys file, regenerated with `extract_keys.py ... v0.4.0`, fails this test."""
    assert KEYS["scheduler"] == kvevents.LLMD_IMAGE.rsplit(":", 1)[1]
    vllm = VLLM["request_add_special_tokens"]
    assert KEYS["tokenization"]["completion_add_special_tokens"] is vllm["completion"] is True
    assert KEYS["tokenization"]["chat_add_special_tokens"] is vllm["chat"] is False
    assert KEYS["tokenization"]["chat_template_from_local_tokenizer_path"] is True
    _, _, objs = _objects(EXAMPLE)
    for model in MODELS:
        pool = _plugin(_config(objs, model), kvevents.PLUGIN_TYPE)["parameters"]["indexerConfig"][
            "tokenizersPoolConfig"]
        assert pool["local"]["modelTokenizerMap"][pool["modelName"]].endswith("/tokenizer.json")


def test_the_replicas_reach_the_pickers_zmq_port_and_nothing_else_gains_a_way_in():
    _, _, objs = _objects(EXAMPLE)
    (servers_policy,) = [d for n, d in objs["NetworkPolicy"].items() if not n.endswith(("-epp", "-bbr"))]
    assert servers_policy["spec"]["policyTypes"] == ["Ingress"]  # the replicas' egress is open
    for model in MODELS:
        labels = objs["Deployment"][model]["spec"]["template"]["metadata"]["labels"]
        policy = objs["NetworkPolicy"][f"{model}-epp"]["spec"]
        zmq = [r for r in policy["ingress"] if {"protocol": "TCP", "port": 5557} in r["ports"]]
        (rule,) = zmq
        assert rule["ports"] == [{"protocol": "TCP", "port": 5557}]
        (source,) = rule["from"]
        assert source["podSelector"]["matchLabels"].items() <= labels.items()
        other = [m for m in MODELS if m != model][0]
        other_labels = objs["Deployment"][other]["spec"]["template"]["metadata"]["labels"]
        assert not source["podSelector"]["matchLabels"].items() <= other_labels.items()
        pod = objs["Deployment"][f"{model}-epp"]["spec"]["template"]
        assert _restricted_violations(pod["spec"]) == []
        ports = {p["name"]: p["containerPort"] for p in pod["spec"]["containers"][0]["ports"]}
        assert ports["zmq"] == 5557


def test_the_tokenizer_fetch_puts_the_files_where_the_scorer_reads_them(tmp_path):
    """The init container's program, run with a stand-in huggingface_hub that records its calls and writes what
    hf_hub_download would (local_dir/filename); the tokenizers folder is a temporary one."""
    _, _, objs = _objects(EXAMPLE)
    init = objs["Deployment"]["llama-8b-epp"]["spec"]["template"]["spec"]["initContainers"][0]
    # the picker's own image, which the node pulls for the picker anyway: llm-d-inference-scheduler v0.5.0's
    # Dockerfile.epp links /usr/bin/python3 to python3.12 and puts a venv with the vLLM 0.14.0 CPU wheel, hence
    # transformers and huggingface_hub, on the image's PYTHONPATH; the model's
    # vLLM image (about 12 GB) would be pulled onto a system node for two small files
    picker = objs["Deployment"]["llama-8b-epp"]["spec"]["template"]["spec"]["containers"][0]
    assert init["image"] == picker["image"] == kvevents.LLMD_IMAGE and init["command"][:2] == ["python3", "-c"]
    script, args = init["command"][2], init["command"][3:]
    assert args == ["llama-8b|meta-llama/Llama-3.1-8B-Instruct|0e9e39f249a16976918f6564b8830bc894c89659",
                    "tokenizer.json", "tokenizer_config.json"]
    assert {e["name"]: e["value"] for e in init["env"]}["HF_TOKEN_PATH"] == "/etc/huggingface/token"
    fake = tmp_path / "fake"
    (fake / "huggingface_hub").mkdir(parents=True)
    (fake / "huggingface_hub/__init__.py").write_text(
        "import json,os\n"
        "def hf_hub_download(repo_id,filename,revision,local_dir):\n"
        "    open(os.environ['CALLS'],'a').write(json.dumps([repo_id,filename,revision,local_dir])+'\\n')\n"
        "    if filename not in os.environ.get('MISSING','').split(','):\n"
        "        os.makedirs(local_dir,exist_ok=True); open(os.path.join(local_dir,filename),'w').write('{}')\n"
        "    return os.path.join(local_dir,filename)\n")
    root = tmp_path / "tokenizers"
    local = script.replace("'/tokenizers'", repr(str(root)))
    assert local != script
    env = dict(os.environ, PYTHONPATH=str(fake), CALLS=str(tmp_path / "calls"))
    run = subprocess.run([sys.executable, "-c", local, *args], env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    config = _plugin(_config(objs, "llama-8b"), kvevents.PLUGIN_TYPE)["parameters"]
    path = config["indexerConfig"]["tokenizersPoolConfig"]["local"]["modelTokenizerMap"]["llama-8b"]
    assert (root / os.path.relpath(path, "/tokenizers")).is_file()
    assert (root / "llama-8b/tokenizer_config.json").is_file()  # the chat template, read beside tokenizer.json
    calls = [json.loads(line) for line in (tmp_path / "calls").read_text().splitlines()]
    assert {c[2] for c in calls} == {"0e9e39f249a16976918f6564b8830bc894c89659"}  # the revision vLLM serves
    # a repository without the file fails the init container, naming it
    fresh = script.replace("'/tokenizers'", repr(str(tmp_path / "fresh")))
    run = subprocess.run([sys.executable, "-c", fresh, *args], capture_output=True, text=True, timeout=60,
                         env=dict(env, MISSING="tokenizer_config.json"))
    assert run.returncode != 0 and "meta-llama/Llama-3.1-8B-Instruct: no tokenizer_config.json" in run.stderr


def test_the_example_checks_clean_and_approximate_needs_nothing(tmp_path):
    assert [f.rule for f in check_text(EXAMPLE.read_text(), tmp_path).findings] == []
    approximate = _bp(EXAMPLE.read_text(), extra_args="[--block-size, '32']").replace(
        "prefix_routing: precise", "prefix_routing: approximate")
    assert rule_findings(approximate, tmp_path, "prefix-routing") == []


def test_prefix_routing_refuses_flags_that_break_the_hashes_or_the_events(tmp_path):
    text = EXAMPLE.read_text()
    for flags, expected in [
        ("[--no-enable-prefix-caching]", "--no-enable-prefix-caching in extra_args of model 'qwen-7b'"),
        ("[--block-size, '32']", "--block-size in extra_args"),
        ("[--prefix-caching-hash-algo, sha256]", "--prefix-caching-hash-algo in extra_args"),
        ("['--kv-events-config={}']", "--kv-events-config in extra_args"),
        ("[--data-parallel-size, '2']", "--data-parallel-size in extra_args"),
    ]:
        (message,) = rule_findings(_bp(text, extra_args=flags), tmp_path, "prefix-routing")
        assert message.startswith(expected), message
    # a flag that does not touch the blocks passes
    assert rule_findings(_bp(text, extra_args="[--max-num-seqs, '64']"), tmp_path, "prefix-routing") == []


def test_prefix_routing_needs_hub_weights_and_one_pod_replicas(tmp_path):
    s3 = EXAMPLE.read_text().replace(
        "weights: {revision: a09a35458c702b33eeacc393d103063234e8bc28}",
        'weights: {source: s3, uri: "s3://acme-models/qwen2.5-7b/"}', 1)
    (message,) = rule_findings(s3, tmp_path, "prefix-routing")
    assert "loads its weights from s3" in message
    multinode = (ROOT / "blueprints/inference-multinode.yaml").read_text().replace(
        "      autoscaler: keda\n", "      autoscaler: keda\n    gateway:\n      prefix_routing: precise\n", 1)
    (message,) = rule_findings(multinode, tmp_path, "prefix-routing")
    assert "spans 2 nodes" in message
    plain = multinode.replace("      prefix_routing: precise\n", "      prefix_routing: approximate\n")
    assert rule_findings(plain, tmp_path, "prefix-routing") == []


def test_adapters_warn_that_their_requests_find_no_block(tmp_path):
    gateway = GATEWAY.read_text()
    assert rule_findings(gateway, tmp_path, "prefix-routing-adapters") == []
    precise = gateway.replace("      request_timeout_s: 300", "      request_timeout_s: 300\n"
                              "      prefix_routing: precise", 1)
    (message,) = rule_findings(precise, tmp_path, "prefix-routing-adapters")
    assert message.startswith("model 'llama-8b' serves LoRA adapters (llama-8b-sql, llama-8b-support)")


def test_render_check_sees_a_change_of_routing(tmp_path):
    assert_render_check_sees(EXAMPLE, "prefix_routing: precise", "prefix_routing: approximate",
                             "chat/k8s/qwen-7b-epp-configmap.yaml", tmp_path)


def test_the_plan_says_which_routing_each_model_gets():
    for source, expected in ((EXAMPLE, "precise prefix"), (GATEWAY, "approximate prefix")):
        steps = _steps(source)
        for model in MODELS:
            assert steps[f"{model}: routing"].result == expected
    assert "precise-prefix-cache-scorer x2" in _steps(EXAMPLE)["qwen-7b: routing"].formula


def _steps(source):
    from fleetform.pipeline import check
    from fleetform.sizing import sizing

    (fleet,) = sizing(check(source).model)
    return {s.what: s for s in fleet.steps}


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_subscriber_set_up_as_the_picker_receives_what_vllm_publishes():
    """Real ZMQ sockets on 127.0.0.1, each side set up from the rendered files as its source does: vLLM's publisher
    (v0.11.0 distributed/kv_events.py ZmqEventPublisher: PUB, bind only for an endpoint with `*`, `::`, ipc:// or
    inproc://, else connect; frames (topic, seq as 8 bytes big-endian, payload)) and the picker's subscriber
    (llm-d-kv-cache v0.5.0 zmq_subscriber.go: SUB binds zmqEndpoint (not remote), subscribes to topicFilter, wants 3
    frames, splits the topic on `@`). Only the port is a free one instead of 5557 and the Service name 127.0.0.1.
    Two sides that both bound, or both connected, would never meet; a topic outside the filter is not delivered."""
    import time

    import zmq

    _, _, objs = _objects(EXAMPLE)
    args = _server(objs, "qwen-7b")["args"]
    events = json.loads(_arg(args, "--kv-events-config"))
    picker = _plugin(_config(objs, "qwen-7b"), kvevents.PLUGIN_TYPE)["parameters"]["kvEventsConfig"]
    port = str(_free_port())

    def binds(endpoint: str) -> bool:
        return "*" in endpoint or "::" in endpoint or endpoint.startswith(("ipc://", "inproc://"))

    def local(endpoint: str) -> str:
        return re.sub(r"//[^:/]+:5557$", f"//127.0.0.1:{port}", endpoint)

    assert not binds(events["endpoint"]) and binds(picker["zmqEndpoint"])  # vLLM connects, the picker binds
    context = zmq.Context()
    sub = context.socket(zmq.SUB)
    pub = context.socket(zmq.PUB)
    try:
        for socket_ in (sub, pub):
            socket_.setsockopt(zmq.LINGER, 0)
        sub.bind(local(picker["zmqEndpoint"]))
        sub.setsockopt_string(zmq.SUBSCRIBE, picker["topicFilter"])
        pub.connect(local(events["endpoint"]))
        topic = events["topic"].replace("$(POD_IP)", "10.72.3.17").encode()
        stray = b"kv.10.72.3.18.qwen-7b"  # outside the filter: must never arrive
        deadline, parts = time.monotonic() + 10, None
        seq = 0
        while parts is None and time.monotonic() < deadline:  # a PUB drops what it sends before the SUB joined
            pub.send_multipart((stray, seq.to_bytes(8, "big"), b"\x90"))
            pub.send_multipart((topic, seq.to_bytes(8, "big"), b"\x90"))
            seq += 1
            if sub.poll(100):
                parts = sub.recv_multipart()
        assert parts is not None, "nothing arrived"
        assert len(parts) == 3 and parts[0] == topic
        assert parts[0].decode().split("@") == ["kv", "10.72.3.17", "qwen-7b"]
        while sub.poll(200):
            assert sub.recv_multipart()[0] == topic
    finally:
        pub.close()
        sub.close()
        context.term()


def test_diff_calls_a_changed_picker_a_drain(tmp_path):
    """The endpoint picker's Deployment is Recreate (one replica, as the inferencepool chart makes it): Kubernetes stops
    the old pod before it starts the new one, so switching routing leaves each model's route unanswered until the new
    picker is ready; the diff says so instead of "replaces the pods one by one"."""
    from conftest import run_cli

    example = ROOT / "blueprints/inference-precise.yaml"
    old = tmp_path / "approximate.yaml"
    old.write_text(example.read_text().replace("prefix_routing: precise", "prefix_routing: approximate", 1))
    out = run_cli("diff", str(old), str(example)).stdout
    for model in ("qwen-7b", "llama-8b"):
        assert (f"[drain] Deployment chat-deployment-chat-{model}-epp: strategy Recreate: Kubernetes stops its pods "
                "before it starts the new ones") in out
        assert f"[rolling] Deployment chat-deployment-chat-{model}: Kubernetes replaces the pods one by one" in out
