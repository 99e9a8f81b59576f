"""LoRA adapters per model (issue 23, fleetform/lora.py): vLLM's flags, the slots it preallocates, the init
containers that give every replica its adapters before vLLM starts, the S3 grant, the gateway's routes and the
rules. The figures are vLLM 0.11.0's (the wheel's vllm/config/lora.py and vllm/lora/layers/*.py, cited in
fleetform/lora.py). What only a GPU would prove (that vLLM's profiler measures the same bytes, that a request
for an adapter name is answered with it) is not proven here: the shapes of the tensors are read from the source."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import replace

import pytest
import yaml

from conftest import ROOT
from fleetform import lora
from fleetform.k8s import AWS_CLI_IMAGE, OWNED_FLAGS, S3_FETCH_SCRIPT
from fleetform.pipeline import check
from fleetform.render import render

EXAMPLE = ROOT / "blueprints/inference-gateway.yaml"
LLAMA_REVISION = "0e9e39f249a16976918f6564b8830bc894c89659"


def _blueprint(adapters: str, extra: str = "", model: str = "meta-llama/Llama-3.1-8B-Instruct",
               instance: str = "g6e.xlarge", tp: int = 1, precision: str = "bf16") -> str:
    return f"""apiVersion: fleetform/v1
kind: Blueprint
metadata: {{name: lora, version: 1.0.0}}
provider:
  cloud: aws
  region: us-east-1
  availability_zone: us-east-1a
  network: {{cidr: 10.40.0.0/16}}
fleets:
  - name: serve
    role: inference
    instance_type: {instance}
    nodes: 1
    scheduler: {{type: kubernetes, version: "1.35"}}
    models:
      - name: chat
        image: vllm/vllm-openai:v0.11.0
        model: {model}
        weights: {{revision: {LLAMA_REVISION}}}
        precision: {precision}
        tensor_parallel: {tp}
        max_model_len: 8192
        replicas: 1
        hf_token_secret: hf-token
{extra}        adapters:
{adapters}"""


S3_AND_HUB = ("          - {name: sql, source: \"s3://acme-adapters/sql/\", rank: 16}\n"
              f"          - {{name: law, source: acme/law-lora, revision: {LLAMA_REVISION}, rank: 20}}\n")


def _check(text: str, tmp_path):
    path = tmp_path / "bp.yaml"
    path.write_text(text)
    return check(path)


def _deployment(text: str, tmp_path) -> dict:
    result = _check(text, tmp_path)
    assert result.model is not None, [f.to_text() for f in result.findings]
    files = render(result.model)
    return yaml.safe_load(files["serve/k8s/chat-deployment.yaml"])


def _rules(text: str, tmp_path, prefix: str = "lora-") -> list[tuple[str, str]]:
    return [(f.rule, f.message) for f in _check(text, tmp_path).findings if f.rule.startswith(prefix)]


# --- the slots vLLM preallocates -------------------------------------------------------------------------

def test_a_rank_16_slot_of_llama_3_1_8b_is_the_tensors_vllm_allocates():
    """Counted by hand from vLLM 0.11.0's create_lora_weights (bf16, tp 1, Llama-3.1-8B: hidden 4096,
    intermediate 14336, 32 heads and 8 KV heads of 128, vocabulary 128256, 32 layers):
    qkv_proj  a 3 x 16 x 4096, b 16 x (4096 + 1024 + 1024)      o_proj    a 16 x 4096,  b 4096 x 16
    gate_up   a 2 x 16 x 4096, b 2 x 14336 x 16                  down_proj a 16 x 14336, b 4096 x 16
    = 16 x 81,920 = 1,310,720 a layer, x 32 = 41,943,040; embed_tokens 256 x 4096 + (128256 + 256) x 16 +
    4096 x 16 = 3,170,304; lm_head 16 x 4096 + 128256 x 16 + 256 x 4096 = 3,166,208: 48,279,552 elements."""
    spec = check(EXAMPLE).model.fleets[0].models[1].spec
    assert lora.slot_elements(spec.lora, spec, 1, 16) == 48_279_552
    # the slot is linear in the rank where it multiplies, and the extra-vocabulary rows do not
    assert lora.slot_elements(spec.lora, spec, 1, 32) == 2 * 48_279_552 - 2 * 256 * 4096
    # tensor parallel: lora_a of column-parallel and lora_b of row-parallel layers sit whole on each GPU
    per_layer_tp2 = 16 * (7 * 2 * 4096 + 2 * 4096 + 2 * 1024 + 3 * 14336)
    assert lora.slot_elements(spec.lora, spec, 2, 16) == 32 * per_layer_tp2 + 2 * (3_170_304 + 3_166_208)
    # a model whose vLLM class wraps no embeddings (Qwen2ForCausalLM) counts the layers only
    qwen = check(EXAMPLE).model.fleets[0].models[0].spec
    assert lora.slot_elements(qwen.lora, qwen, 1, 8) == 28 * 8 * (7 * 3584 + 2 * 3584 + 2 * 512 + 3 * 18944)


def test_the_memory_rules_count_the_slots(tmp_path):
    """The slots are part of vLLM's overhead: the example's two rank-32 slots add 0.38 GB; 64 slots of rank 512
    (3 GB each) leave one L40S no room for an 8,192-token sequence: kv-cache-fit (vLLM refuses to start) and
    kv-cache-room."""
    model = check(EXAMPLE).model.fleets[0].models[1]
    assert (model.lora.max_loras, model.lora.max_lora_rank) == (2, 32)
    assert model.overhead_gb == pytest.approx(2.0 + 2 * lora.slot_elements(model.spec.lora, model.spec, 1, 32) * 2 / 1e9)
    assert replace(model, lora=None).overhead_gb == 2.0
    big = _blueprint(S3_AND_HUB, "        max_loras: 64\n        max_lora_rank: 512\n")
    assert sorted(r for r, _ in _rules(big, tmp_path, "kv-cache")) == ["kv-cache-fit", "kv-cache-room"]
    # control: the same L40S with the adapters at the default slots (two of rank 32) has room
    assert _rules(_blueprint(S3_AND_HUB), tmp_path, "kv-cache") == []
    # the fit the plan and the hints search with counts them at each tensor parallel it tries
    from fleetform.fit import fits

    assert fits(model, 48, 1, 8192)
    many = replace(model, lora=replace(model.lora, max_loras=64, max_lora_rank=512))
    assert not fits(many, 48, 1, 8192) and fits(replace(many, lora=None), 48, 1, 8192)
    assert lora.slots_gb(many, 2) > lora.slots_gb(many, 1)  # lora_a of column-parallel layers sits whole on each GPU


def test_limits_are_derived_as_vllm_accepts_them():
    adapters = tuple(lora.Adapter(f"a{i}", "s3://b/a/", None, rank, ()) for i, rank in enumerate((8, 17, 4, 4, 4)))
    derived = lora.derive(adapters, None, None, None, ())
    # the smallest rank of LoRAConfig's possible_max_ranks that holds 17; four slots at most; a CPU cache for all
    assert (derived.max_lora_rank, derived.max_loras, derived.max_cpu_loras) == (32, 4, 5)
    assert lora.derive(adapters[:2], None, None, None, ()).max_cpu_loras is None  # vLLM's default holds both
    assert lora.derive(adapters, 2, 64, 9, ()).args()[:8] == [
        "--enable-lora", "--max-loras", "2", "--max-lora-rank", "64", "--max-cpu-loras", "9", "--lora-modules"]
    assert lora.derive(adapters[:1], None, None, None, ()).max_lora_rank == 8


# --- what vLLM is told -----------------------------------------------------------------------------------

def test_vllm_gets_the_lora_flags_of_the_pinned_parser(tmp_path):
    container = _deployment(_blueprint(S3_AND_HUB), tmp_path)["spec"]["template"]["spec"]["containers"][0]
    from fleetform.rules.inference import argv_problems, vllm_flags  # after check() registered every rule in order

    args = container["args"]
    at = args.index("--enable-lora")
    assert args[at:] == ["--enable-lora", "--max-loras", "2", "--max-lora-rank", "32", "--lora-modules",
                         "sql=/adapters/sql", "law=/adapters/law"]
    # every flag exists in vLLM 0.11.0's own parser, with the arity it has there (--lora-modules: nargs '+')
    known = vllm_flags()
    assert {a for a in args if a.startswith("--")} <= set(known)
    assert argv_problems(args[1:]) == []
    # fleetform owns them: extra_args may not set them beside the adapters
    assert {"--enable-lora", "--max-loras", "--max-lora-rank", "--max-cpu-loras", "--lora-modules"} <= OWNED_FLAGS
    text = _blueprint(S3_AND_HUB).replace("        hf_token_secret: hf-token\n",
                                          "        hf_token_secret: hf-token\n        extra_args: [--max-loras, \"8\"]\n")
    assert ("extra-args", "--max-loras is set by fleetform") in _rules(text, tmp_path, "extra-args")
    # the adapters volume is read-only for vLLM
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    assert mounts["adapters"] == {"name": "adapters", "mountPath": "/adapters", "readOnly": True}


def test_every_replica_downloads_the_adapters_before_vllm_starts(tmp_path):
    pod = _deployment(_blueprint(S3_AND_HUB), tmp_path)["spec"]["template"]["spec"]
    init = {c["name"]: c for c in pod["initContainers"]}
    assert list(init) == ["adapters-hub", "adapters-s3"]
    hub, s3 = init["adapters-hub"], init["adapters-s3"]
    assert hub["image"] == "vllm/vllm-openai:v0.11.0" and s3["image"] == AWS_CLI_IMAGE
    assert hub["command"][:3] == ["python3", "-c", lora.FETCH_SCRIPT]
    assert hub["command"][3:] == [f"law|acme/law-lora|{LLAMA_REVISION}"]
    assert s3["command"] == ["sh", "-ec", S3_FETCH_SCRIPT, "sh", "sql=s3://acme-adapters/sql/"]
    # the Hub token reaches the Hub download as a file; the S3 copy reads the blueprint's region
    assert {"name": "HF_TOKEN_PATH", "value": "/etc/huggingface/token"} in hub["env"]
    assert {"name": "hf-token", "mountPath": "/etc/huggingface", "readOnly": True} in hub["volumeMounts"]
    assert {"name": "AWS_REGION", "value": "us-east-1"} in s3["env"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["adapters"]["emptyDir"] == {"sizeLimit": "10Gi"}
    for c in init.values():
        assert {"name": "adapters", "mountPath": "/adapters"} in c["volumeMounts"]
        assert c["securityContext"]["readOnlyRootFilesystem"] and c["securityContext"]["runAsNonRoot"]
    # a model without adapters gets no init container, flag or volume
    plain = _deployment(_blueprint(S3_AND_HUB).split("        adapters:\n")[0], tmp_path)["spec"]["template"]["spec"]
    assert "initContainers" not in plain and "adapters" not in {v["name"] for v in plain["volumes"]}
    assert "--enable-lora" not in plain["containers"][0]["args"]


def test_the_s3_adapters_join_the_pod_identitys_read_only_grant(tmp_path):
    result = _check(_blueprint(S3_AND_HUB), tmp_path)
    model = result.model
    identities = {i.name: i for i in model.cluster.pod_identities}
    assert identities["serve-chat-weights"].s3_prefixes == ("s3://acme-adapters/sql/",)
    assert identities["serve-chat-weights"].service_account == "chat-weights"
    files = render(model)
    account = yaml.safe_load(files["serve/k8s/chat-serviceaccount.yaml"])
    assert account["metadata"]["name"] == "chat-weights"
    deployment = yaml.safe_load(files["serve/k8s/chat-deployment.yaml"])["spec"]["template"]["spec"]
    assert deployment["serviceAccountName"] == "chat-weights" and deployment["automountServiceAccountToken"] is True
    # S3 weights and S3 adapters: one role, both folders
    both = _blueprint(S3_AND_HUB).replace(f"weights: {{revision: {LLAMA_REVISION}}}",
                                          "weights: {source: s3, uri: \"s3://acme-weights/llama/\"}")
    identity = {i.name: i for i in _check(both, tmp_path).model.cluster.pod_identities}["serve-chat-weights"]
    assert identity.s3_prefixes == ("s3://acme-adapters/sql/", "s3://acme-weights/llama/")
    # Hub adapters alone need no AWS identity
    hub_only = _blueprint(S3_AND_HUB.splitlines(keepends=True)[1])
    assert "serve-chat-weights" not in {i.name for i in _check(hub_only, tmp_path).model.cluster.pod_identities}


def test_the_plan_grants_exactly_the_adapter_folders(tmp_path):
    from fleetform.plan import record

    model = _check(_blueprint(S3_AND_HUB), tmp_path).model
    resources = record(model, render(model))
    policy = json.loads(next(r for r in resources if r["type"] == "aws:iam/rolePolicy:RolePolicy"
                             and r["name"].endswith("serve-chat-weights"))["inputs"]["policy"])
    assert policy == {"Version": "2012-10-17", "Statement": [
        {"Sid": "Read0", "Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::acme-adapters/sql/*"},
        {"Sid": "List0", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::acme-adapters",
         "Condition": {"StringLike": {"s3:prefix": ["sql/*"]}}}]}


# --- the programs the init containers run ----------------------------------------------------------------

FAKE_AWS = """#!/bin/sh
# aws s3 sync SRC DEST ...: copies the fake bucket's folder (FAKE_S3/<bucket>/<prefix>) into DEST
[ "$1 $2" = "s3 sync" ] || { echo "unexpected: $*" >&2; exit 2; }
src="${3#s3://}"; mkdir -p "$4"; cp -R "$FAKE_S3/$src." "$4"
echo "$*" >> "$FAKE_S3/calls"
"""


def _s3_run(tmp_path, *items):
    bin_dir, bucket = tmp_path / "bin", tmp_path / "s3"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "aws").write_text(FAKE_AWS)
    (bin_dir / "aws").chmod(0o755)
    script = S3_FETCH_SCRIPT.replace(lora.ADAPTERS_DIR, str(tmp_path / "adapters"))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_S3": str(bucket)}
    return subprocess.run(["sh", "-ec", script, "sh", *items], capture_output=True, text=True, env=env, timeout=30)


def test_the_s3_copy_puts_each_adapter_in_its_folder_and_fails_without_adapter_config(tmp_path):
    for name in ("sql", "law"):
        folder = tmp_path / "s3" / "acme-adapters" / name
        folder.mkdir(parents=True)
        (folder / "adapter_model.safetensors").write_text(name)
    (tmp_path / "s3/acme-adapters/sql/adapter_config.json").write_text("{}")
    done = _s3_run(tmp_path, "sql=s3://acme-adapters/sql/")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "adapters/sql/adapter_model.safetensors").read_text() == "sql"
    assert done.stdout == "sql: s3://acme-adapters/sql/\n"
    assert (tmp_path / "s3/calls").read_text().split("\n")[0] == (
        f"s3 sync s3://acme-adapters/sql/ {tmp_path}/adapters/sql/ --only-show-errors --no-progress")
    # a folder without PEFT's adapter_config.json stops the pod's start, naming the source
    failed = _s3_run(tmp_path, "sql=s3://acme-adapters/sql/", "law=s3://acme-adapters/law/")
    assert failed.returncode == 1 and failed.stderr == "s3://acme-adapters/law/: no adapter_config.json\n"


def test_the_s3_copy_is_shellcheck_clean(tmp_path):
    if shutil.which("shellcheck") is None:
        if os.environ.get("CI"):
            pytest.fail("shellcheck is missing in CI")
        pytest.skip("shellcheck is not installed")
    script = tmp_path / "fetch.sh"
    script.write_text("#!/bin/sh\n" + S3_FETCH_SCRIPT + "\n")
    result = subprocess.run(["shellcheck", "-s", "sh", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


FAKE_HUB = """import os, json
def snapshot_download(repo_id, revision=None, local_dir=None):
    with open(os.environ["FAKE_HUB_CALLS"], "a") as f:
        f.write(json.dumps([repo_id, revision, local_dir]) + "\\n")
    os.makedirs(local_dir, exist_ok=True)
    if repo_id != "acme/empty":
        open(os.path.join(local_dir, "adapter_config.json"), "w").write("{}")
    return local_dir
"""


def test_the_hub_download_pins_the_revision_and_fails_without_adapter_config(tmp_path):
    """The program runs as the init container runs it (python3 -c SCRIPT ITEMS...), against a stand-in for
    huggingface_hub.snapshot_download with its signature (repo_id, revision, local_dir)."""
    (tmp_path / "huggingface_hub.py").write_text(FAKE_HUB)
    calls = tmp_path / "calls"
    script = lora.FETCH_SCRIPT.replace(lora.ADAPTERS_DIR, str(tmp_path / "adapters"))
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "FAKE_HUB_CALLS": str(calls)}
    done = subprocess.run([sys.executable, "-c", script, f"law|acme/law-lora|{LLAMA_REVISION}", "med|acme/med|"],
                          capture_output=True, text=True, env=env, timeout=30)
    assert done.returncode == 0, done.stderr
    assert [json.loads(line) for line in calls.read_text().splitlines()] == [
        ["acme/law-lora", LLAMA_REVISION, f"{tmp_path}/adapters/law"], ["acme/med", None, f"{tmp_path}/adapters/med"]]
    assert done.stdout.splitlines() == [f"law: acme/law-lora@{LLAMA_REVISION}", "med: acme/med@main"]
    failed = subprocess.run([sys.executable, "-c", script, "x|acme/empty|"], capture_output=True, text=True,
                            env=env, timeout=30)
    assert failed.returncode == 1 and "acme/empty: no adapter_config.json" in failed.stderr


# --- the gateway -----------------------------------------------------------------------------------------

def test_an_adapter_is_reachable_through_the_gateway_by_its_name():
    """The body-based router puts the request's `model` into X-Gateway-Model-Name (Inference Extension v1.1.0,
    config/manifests/bbr-example/httproute_bbr.yaml); the route of the base model matches each adapter's name
    too, and the wake trigger counts requests for the adapters as requests for the model."""
    files = render(check(EXAMPLE).model)
    route = yaml.safe_load(files["chat/k8s/llama-8b-httproute.yaml"])
    (rule,) = route["spec"]["rules"]
    assert [m["headers"][0]["value"] for m in rule["matches"]] == ["llama-8b", "llama-8b-sql", "llama-8b-support"]
    assert all(m["path"] == {"type": "PathPrefix", "value": "/v1"} for m in rule["matches"])
    assert rule["backendRefs"][0]["name"] == "llama-8b"
    scaled = yaml.safe_load(files["chat/k8s/llama-8b-scaledobject.yaml"])
    wake = next(t for t in scaled["spec"]["triggers"] if t.get("name") == "gateway-requests")
    assert 'model_name=~"llama-8b|llama-8b-sql|llama-8b-support"' in wake["metadata"]["query"]
    # control: the model without adapters keeps its one match
    (other,) = yaml.safe_load(files["chat/k8s/qwen-7b-httproute.yaml"])["spec"]["rules"]
    assert len(other["matches"]) == 1


# --- the rules -------------------------------------------------------------------------------------------

def test_the_rules_and_their_controls(tmp_path):
    assert _rules(_blueprint(S3_AND_HUB), tmp_path) == []
    high = _blueprint(S3_AND_HUB, "        max_lora_rank: 16\n")
    assert [r for r, _ in _rules(high, tmp_path)] == ["lora-rank"]
    assert "rank 20, more than max_lora_rank 16" in _rules(high, tmp_path)[0][1]
    short = _blueprint(S3_AND_HUB, "        max_loras: 2\n        max_cpu_loras: 1\n")
    assert [r for r, _ in _rules(short, tmp_path)] == ["lora-cpu-loras"]
    evicting = _blueprint(S3_AND_HUB, "        max_loras: 1\n        max_cpu_loras: 1\n")
    assert [r for r, _ in _rules(evicting, tmp_path)] == ["lora-cpu-cache"]
    # two adapters of one model with one name: unique-names; an adapter named like a model of the fleet: lora-names
    named = _blueprint(S3_AND_HUB.replace("name: law", "name: sql"))
    assert [r for r, _ in _rules(named, tmp_path, "unique-names")] == ["unique-names"]
    named = _blueprint(S3_AND_HUB.replace("name: law", "name: chat"))
    assert [r for r, _ in _rules(named, tmp_path)] == ["lora-names"]
    for source in ("s3://acme-adapters/sql", "s3://Acme/sql/", "acme/law/extra", "hf://acme/law", "law"):
        bad = _blueprint(S3_AND_HUB.replace('"s3://acme-adapters/sql/"', json.dumps(source)))
        assert [r for r, _ in _rules(bad, tmp_path)] == ["lora-source"], source
    unknown = _blueprint(S3_AND_HUB, model="acme/private-8b").replace(
        "        precision: bf16\n", "        precision: bf16\n        model_params_billion: 8\n")
    assert [r for r, _ in _rules(unknown, tmp_path)] == ["lora-unsized"]
    # the schema refuses what vLLM's LoRAConfig refuses outright: a max_lora_rank it does not list
    assert any(f.rule == "schema" for f in _check(_blueprint(S3_AND_HUB, "        max_lora_rank: 24\n"), tmp_path).findings)


def test_a_hub_adapter_without_a_commit_is_unpinned_like_hub_weights(tmp_path):
    """snapshot_download(revision=None) takes the repository's `main` when each replica starts (FETCH_SCRIPT), so
    replicas started on different days may serve different adapters under one name: hf-revision-unpinned warns,
    as it does for Hub weights (the blueprint's weights are pinned, so every warning here is an adapter's)."""
    pinned = _blueprint(S3_AND_HUB)
    assert _rules(pinned, tmp_path, "hf-revision-unpinned") == []  # control: a commit id, and an S3 folder
    floating = _blueprint(S3_AND_HUB.replace(f", revision: {LLAMA_REVISION}", ""))
    found = [f for f in _check(floating, tmp_path).findings if f.rule == "hf-revision-unpinned"]
    assert [(f.severity, f.path) for f in found] == [("warning", "fleets[0].models[0].adapters[1].source")]
    assert "adapter 'law'" in found[0].message and "`main`" in found[0].message
    branch = _blueprint(S3_AND_HUB.replace(f"revision: {LLAMA_REVISION}", "revision: v2"))
    assert [r for r, _ in _rules(branch, tmp_path, "hf-revision-unpinned")] == ["hf-revision-unpinned"]
    # a malformed Hub id is lora-source's error alone
    bad = _blueprint(S3_AND_HUB.replace(f"acme/law-lora, revision: {LLAMA_REVISION}", "hf://acme/law"))
    assert _rules(bad, tmp_path, "hf-revision-unpinned") == []


ONPREM = """apiVersion: fleetform/v1
kind: Blueprint
metadata: {{name: lora, version: 1.0.0}}
provider: {{cloud: onprem}}
fleets:
  - name: serve
    role: inference
    hardware: {{gpu: H100-80GB, gpu_count: 8, sockets: 2, cores_per_socket: 56, threads_per_core: 2, memory_gib: 2048}}
    hosts: gpu-[01-02]
    scheduler: {{type: kubernetes, version: "1.35", namespace: serve}}
    models:
      - name: chat
        image: vllm/vllm-openai:v0.11.0
        model: meta-llama/Llama-3.1-8B-Instruct
        weights: {{revision: {revision}}}
        precision: bf16
        tensor_parallel: 1
        max_model_len: 8192
        replicas: 1
        adapters:
{adapters}"""


def test_an_s3_adapter_needs_aws_where_its_init_container_has_pod_identity(tmp_path):
    """The S3 init container's `aws s3 sync` reads credentials from EKS Pod Identity (adapter_fetchers); on another
    provider it has none and every replica stays in Init:CrashLoopBackOff, as weights from s3 would (weight-source)."""
    s3 = ONPREM.format(revision=LLAMA_REVISION, adapters=S3_AND_HUB)
    found = [(f.rule, f.path) for f in _check(s3, tmp_path).findings if f.severity == "error"]
    assert found == [("lora-source", "fleets[0].models[0].adapters[0].source")]
    hub_only = ONPREM.format(revision=LLAMA_REVISION, adapters=S3_AND_HUB.splitlines(keepends=True)[1])
    assert [f.rule for f in _check(hub_only, tmp_path).findings if f.severity == "error"] == []  # control
