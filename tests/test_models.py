"""The model catalog (providers/models.json) and the rules and hints that follow from it: model-params,
model-context, kv-cache-fit, model-fits' instance types, and an instance type the catalog leaves out."""

from __future__ import annotations

import json
import re

import pytest

from conftest import ROOT, run_cli
from fleetform.catalog import load_catalog
from fleetform.models import GIB, load_models
from fleetform.pipeline import check
import fleetform.rules.checks  # noqa: F401  (registers every rule in its order before the imports below: importing
# rules.inference first would register its rules ahead of unique-names, and test_hostile's order check fails)
from fleetform.rules.inference import gated_prefixes
from fleetform.rules.models import BLOCK_TOKENS, PARAMS_TOLERANCE
from fleetform.schema import schema

HEAD = """apiVersion: fleetform/v1
kind: Blueprint
metadata: {name: a, version: 1.0.0}
provider: {cloud: aws, region: us-east-1, availability_zone: us-east-1a, network: {cidr: 10.0.0.0/16}}
fleets:
  - name: serve
    role: inference
    instance_type: INSTANCE
    nodes: 1
    scheduler: {type: kubernetes, version: "1.33"}
    models:
      - name: chat
        image: vllm/vllm-openai:v0.11.0
        hf_token_secret: hf-token
"""


def _check(tmp_path, instance: str, model: str, **fields):
    text = HEAD.replace("INSTANCE", instance) + f"        model: {model}\n"
    fields.setdefault("precision", "bf16")
    fields.setdefault("tensor_parallel", 1)
    text += "".join(f"        {k}: {v}\n" for k, v in fields.items())
    path = tmp_path / "bp.yaml"
    path.write_text(text)
    return check(path)


def _rules(result) -> dict[str, list]:
    found: dict[str, list] = {}
    for f in result.findings:
        found.setdefault(f.rule, []).append(f)
    return found


# --- the data ---------------------------------------------------------------------------------------

def test_every_entry_names_the_source_of_each_figure_and_a_consistent_layout():
    models = load_models().models
    assert len(models) >= 10
    for m in models.values():
        assert {"params_billion", "max_context", "attention"} <= set(m.sources), m.id
        assert all(text.strip() for text in m.sources.values()), m.id
        assert m.attention_heads % m.kv_heads == 0, m.id  # grouped-query attention: whole groups
        assert m.head_dim in (64, 96, 128, 256), m.id
        assert m.active_params_billion is None or m.active_params_billion < m.params_billion, m.id


def test_gated_agrees_with_the_gated_prefixes():
    """One fact, two files: the hf-gated rule's prefixes (each with its page) and the catalog's `gated`."""
    for m in load_models().models.values():
        gated = any(m.id.lower().startswith(p.lower()) for p in gated_prefixes())
        assert m.gated == gated, m.id


def test_the_schema_asks_for_params_exactly_for_models_the_catalog_lacks():
    condition = schema()["$defs"]["model"]["allOf"][0]
    listed = condition["if"]["properties"]["model"]["not"]["enum"]
    assert sorted(listed) == sorted(load_models().models)
    assert condition["then"]["required"] == ["model_params_billion"]


def test_kv_bytes_match_vllms_own_figure_for_llama_31_8b():
    """vLLM refuses Llama-3.1-8B at 131072 tokens on too small a GPU asking for '16.00 GiB KV cache'
    (vllm-project/vllm CI log, 2025-06-26): 2 x 32 x 8 x 128 x 2 B x 131072."""
    spec = load_models().find("meta-llama/Llama-3.1-8B-Instruct")
    assert spec.kv_bytes_per_token(1, 2.0) * 131072 / GIB == pytest.approx(16.00)
    # split over 4 GPUs the replica still stores every KV head once
    assert spec.kv_bytes_per_token(4, 2.0) == spec.kv_bytes_per_token(1, 2.0)


def test_kv_heads_are_replicated_past_their_count():
    """vLLM gives each tensor-parallel GPU max(1, kv_heads // tp) heads: Qwen2.5-7B's 4 KV heads on 8 GPUs
    are 8 stored heads, twice the KV cache per token of TP 1."""
    spec = load_models().find("Qwen/Qwen2.5-7B-Instruct")
    assert spec.kv_heads_stored(8) == 8 and spec.kv_heads_stored(2) == 4
    assert spec.kv_bytes_per_token(8, 2.0) == 2 * spec.kv_bytes_per_token(1, 2.0)


# --- resolution ------------------------------------------------------------------------------------

def test_the_catalog_gives_the_parameters_a_blueprint_leaves_out(tmp_path):
    result = _check(tmp_path, "g6e.xlarge", "Qwen/Qwen2.5-7B-Instruct", max_model_len=8192)
    assert result.ok, [f.to_text() for f in result.findings]
    model = result.model.fleets[0].models[0]
    assert model.model_params_billion == 7.61 and not model.params_given
    assert model.spec.id == "Qwen/Qwen2.5-7B-Instruct"


def test_an_unknown_model_still_needs_its_parameters(tmp_path):
    result = _check(tmp_path, "g6e.xlarge", "Qwen/Qwen2.5-7B-Instruct-AWQ", max_model_len=8192)
    [finding] = result.findings
    assert finding.rule == "schema" and "model_params_billion" in finding.message
    assert "fleetform catalog --models" in finding.hint


# --- model-params ----------------------------------------------------------------------------------

def test_model_params_edge_at_ten_percent(tmp_path):
    known = 7.61
    inside = round(known * (1 + PARAMS_TOLERANCE) - 0.01, 2)
    outside = round(known * (1 + PARAMS_TOLERANCE) + 0.01, 2)
    ok = _check(tmp_path, "g6e.xlarge", "Qwen/Qwen2.5-7B-Instruct", model_params_billion=inside, max_model_len=8192)
    assert "model-params" not in _rules(ok)
    bad = _check(tmp_path, "g6e.xlarge", "Qwen/Qwen2.5-7B-Instruct", model_params_billion=outside, max_model_len=8192)
    [finding] = _rules(bad)["model-params"]
    assert finding.severity.value == "error" and finding.path.endswith("model_params_billion")
    assert "7.61B" in finding.message and "model card" in finding.message


def test_model_params_names_active_parameters_of_a_mixture_of_experts(tmp_path):
    result = _check(tmp_path, "p5.48xlarge", "mistralai/Mixtral-8x7B-Instruct-v0.1", model_params_billion=12.9,
                    tensor_parallel=2, max_model_len=8192)
    [finding] = _rules(result)["model-params"]
    assert "46.7B parameters (12.9B active per token" in finding.message


# --- model-context ---------------------------------------------------------------------------------

def test_model_context_edge(tmp_path):
    spec = load_models().find("Qwen/Qwen2.5-7B-Instruct")
    at = _check(tmp_path, "g6e.xlarge", spec.id, max_model_len=spec.max_context)
    assert "model-context" not in _rules(at), [f.to_text() for f in at.findings]
    over = _check(tmp_path, "g6e.xlarge", spec.id, max_model_len=spec.max_context + 1)
    [finding] = _rules(over)["model-context"]
    assert "32,768" in finding.message and "huggingface.co/Qwen/Qwen2.5-7B-Instruct" in finding.message


YARN = """["--hf-overrides", '{"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768} }']"""
"""Qwen2.5's model card switches on its 131,072 tokens with this rope_scaling; vLLM derives original x factor for
yarn (vllm/config _get_and_verify_max_len), after --hf-overrides is applied to config.json."""


def test_model_context_follows_a_rope_scaling_override(tmp_path):
    """The hint's own way out (--hf-overrides in extra_args) passes: vLLM accepts 4 x 32,768 tokens with it."""
    at = _check(tmp_path, "p5.48xlarge", "Qwen/Qwen2.5-7B-Instruct", max_model_len=131072, extra_args=YARN)
    assert not {"model-context", "extra-args", "schema"} & set(_rules(at)), [f.to_text() for f in at.findings]
    over = _check(tmp_path, "p5.48xlarge", "Qwen/Qwen2.5-7B-Instruct", max_model_len=131073, extra_args=YARN)
    [finding] = _rules(over)["model-context"]
    assert "131,072 tokens" in finding.message and "yarn, factor 4" in finding.message
    # no max_model_len: vLLM takes the scaled 131,072 tokens, and the KV cache is sized for them
    unset = _check(tmp_path, "g6.xlarge", "Qwen/Qwen2.5-7B-Instruct", extra_args=YARN)
    [fit] = _rules(unset)["kv-cache-fit"]
    assert "131,072 tokens" in fit.message


# --- kv-cache-fit ----------------------------------------------------------------------------------

def test_kv_cache_fit_without_max_model_len_takes_the_models_context(tmp_path):
    """Llama-3.1-8B on one L4 with no max_model_len: vLLM takes 131,072 tokens and needs 16 GiB of KV cache."""
    result = _check(tmp_path, "g6.xlarge", "meta-llama/Llama-3.1-8B-Instruct")
    [finding] = _rules(result)["kv-cache-fit"]
    assert finding.path.endswith(".model") and "131,072" in finding.message and "16.00 GiB" in finding.message
    assert "raise tensor_parallel" not in finding.hint  # a g6.xlarge has one GPU


def test_kv_cache_fit_suggests_a_max_model_len_that_fits(tmp_path):
    """The hint's max_model_len passes; one block of tokens more does not."""
    result = _check(tmp_path, "g6.xlarge", "meta-llama/Llama-3.1-8B-Instruct")
    [finding] = _rules(result)["kv-cache-fit"]
    longest = int(re.search(r"set max_model_len: (\d+)", finding.hint).group(1))
    assert longest % BLOCK_TOKENS == 0 and 8192 < longest < 131072
    fits = _check(tmp_path, "g6.xlarge", "meta-llama/Llama-3.1-8B-Instruct", max_model_len=longest)
    assert "kv-cache-fit" not in _rules(fits)
    over = _check(tmp_path, "g6.xlarge", "meta-llama/Llama-3.1-8B-Instruct", max_model_len=longest + BLOCK_TOKENS)
    assert "kv-cache-fit" in _rules(over)
    # one token more takes a whole block more: vLLM counts cdiv(max_model_len, 16) blocks
    # (FullAttentionSpec.max_memory_usage_bytes), so longest + 1 does not fit either
    one_more = _check(tmp_path, "g6.xlarge", "meta-llama/Llama-3.1-8B-Instruct", max_model_len=longest + 1)
    assert "kv-cache-fit" in _rules(one_more)


def test_kv_cache_fit_counts_an_fp8_kv_cache(tmp_path):
    """--kv-cache-dtype fp8 stores one byte an element: Qwen3-8B's 40,960 tokens fit an A10G again."""
    base = dict(gpu_memory_utilization=0.95, max_model_len=40960)
    assert "kv-cache-fit" in _rules(_check(tmp_path, "g5.xlarge", "Qwen/Qwen3-8B", **base))
    fp8 = _check(tmp_path, "g5.xlarge", "Qwen/Qwen3-8B", extra_args='["--kv-cache-dtype", "fp8"]', **base)
    assert "kv-cache-fit" not in _rules(fp8), [f.to_text() for f in fp8.findings]


def test_shipped_blueprints_keep_their_verdicts():
    """The shipped blueprints serve catalogued models (Llama-3.1-8B/70B, Qwen2.5-7B) within their context and
    parameter count: none of the catalog's rules fires."""
    for path in sorted((ROOT / "blueprints").glob("*.yaml")):
        result = check(path)
        assert result.ok, path
        assert not {"model-params", "model-context", "kv-cache-fit"} & {f.rule for f in result.findings}, path


# --- model-heads-tp --------------------------------------------------------------------------------

def test_tensor_parallel_must_divide_the_attention_heads(tmp_path):
    """vLLM: 'Total number of attention heads (28) must be divisible by tensor parallel size (8)'
    (ModelConfig.verify_with_parallel_config). Qwen2.5-7B has 28 heads: TP 8 is refused, TP 4 is not."""
    bad = _check(tmp_path, "g6.48xlarge", "Qwen/Qwen2.5-7B-Instruct", tensor_parallel=8, max_model_len=8192)
    [finding] = _rules(bad)["model-heads-tp"]
    assert finding.severity.value == "error" and finding.path.endswith("tensor_parallel")
    assert "(28) must be divisible by tensor parallel size (8)" in finding.message
    assert finding.hint == "use tensor_parallel 1 or 2 or 4"
    ok = _check(tmp_path, "g6.48xlarge", "Qwen/Qwen2.5-7B-Instruct", tensor_parallel=4, max_model_len=8192)
    assert "model-heads-tp" not in _rules(ok)


def test_fit_never_counts_a_tensor_parallel_vllm_refuses():
    """The hints' search (fleetform/fit.py) skips a TP that does not divide the heads, however much memory."""
    from fleetform.fit import fits

    result = check(ROOT / "blueprints/team-llm.yaml")
    qwen = next(m for f in result.model.fleets if not f.training for m in f.models if m.model == "Qwen/Qwen2.5-7B-Instruct")
    assert fits(qwen, 80.0, 4, 8192) and not fits(qwen, 80.0, 8, 8192)


# --- model-fits' hint ------------------------------------------------------------------------------

def _named_instances(hint: str) -> list[tuple[str, int]]:
    return [(name, int(tp)) for name, tp in re.findall(r"([a-z0-9-]+\.[0-9a-z]+) \(\d+ x [^,]+, tensor_parallel (\d+)", hint)]


def test_model_fits_on_one_gpu_names_instance_types_not_tensor_parallel(tmp_path):
    """A 70B model on a g6.xlarge (one L4): raising tensor_parallel is impossible there; the hint names instance
    types, and each of them, with the tensor_parallel it names, passes every memory rule."""
    result = _check(tmp_path, "g6.xlarge", "meta-llama/Llama-3.1-70B-Instruct", max_model_len=8192)
    [finding] = _rules(result)["model-fits"]
    assert "raise tensor_parallel" not in finding.hint
    named = _named_instances(finding.hint)
    assert len(named) >= 2, finding.hint
    for name, tp in named:
        after = _check(tmp_path, name, "meta-llama/Llama-3.1-70B-Instruct", max_model_len=8192, tensor_parallel=tp)
        assert not {"model-fits", "kv-cache-fit", "kv-cache-room"} & set(_rules(after)), (name, tp)


def test_model_fits_raises_tensor_parallel_where_the_node_has_the_gpus(tmp_path):
    result = _check(tmp_path, "p4de.24xlarge", "meta-llama/Llama-3.1-70B-Instruct", max_model_len=8192)
    [finding] = _rules(result)["model-fits"]
    tp = int(re.search(r"raise tensor_parallel to (\d+) \(the node has 8 GPUs\)", finding.hint).group(1))
    after = _check(tmp_path, "p4de.24xlarge", "meta-llama/Llama-3.1-70B-Instruct", max_model_len=8192,
                   tensor_parallel=tp)
    assert not {"model-fits", "kv-cache-fit", "kv-cache-room"} & set(_rules(after))


# --- an instance type the catalog leaves out -------------------------------------------------------

def test_p3_16xlarge_is_a_real_type_the_catalog_leaves_out(tmp_path):
    text = HEAD.replace("INSTANCE", "p3.16xlarge") + "        model: Qwen/Qwen2.5-7B-Instruct\n" \
        "        precision: bf16\n        tensor_parallel: 1\n"
    path = tmp_path / "bp.yaml"
    path.write_text(text)
    # the model also gets hf-revision-unpinned (a warning, from another rule): only the instance type's finding counts here
    [finding] = [f for f in check(path).findings if f.rule == "instance-type"]
    assert "V100" in finding.message and "does not list" in finding.message and "did you mean" not in finding.hint
    assert "fleetform catalog" in finding.hint
    catalog = load_catalog()
    named = re.findall(r"([a-z0-9-]+\.[0-9a-z]+) \(", finding.hint)
    assert named and all(catalog.instance(n).gpu_count * catalog.instance(n).gpu.memory_gb >= 128 for n in named)


def test_a_misspelled_type_still_gets_did_you_mean(tmp_path):
    text = HEAD.replace("INSTANCE", "p5.48xlarg") + "        model: Qwen/Qwen2.5-7B-Instruct\n" \
        "        precision: bf16\n        tensor_parallel: 1\n"
    path = tmp_path / "bp.yaml"
    path.write_text(text)
    [finding] = [f for f in check(path).findings if f.rule == "instance-type"]
    assert "did you mean 'p5.48xlarge'?" in finding.hint


# --- fleetform catalog --models ----------------------------------------------------------------------

def test_catalog_models_lists_every_model_with_its_sources():
    out = run_cli("catalog", "--models")
    assert out.returncode == 0, out.stderr
    for m in load_models().models.values():
        assert m.id in out.stdout
        assert m.sources["params_billion"].split(" (")[0] in out.stdout
    data = json.loads(run_cli("catalog", "--models", "--format", "json").stdout)
    llama = next(m for m in data["models"] if m["id"] == "meta-llama/Llama-3.1-8B-Instruct")
    assert llama["kv_bytes_per_token_16bit"] == 131072 and llama["gated"] is True
    assert run_cli("catalog", "--models", "--gpu", "H100").returncode == 2


def test_the_plan_sizes_a_catalogued_model_from_its_layout():
    """The reference's llama-70b at 8192 tokens: 2 x 80 x 8 x 128 x 2 B x 8192 = 2.50 GiB of KV cache, TP 4 on
    H100s (Llama-3.1-70B-Instruct in bf16 needs 4 of them), and the SLO steps still follow."""
    from fleetform.sizing import sizing

    model = check(ROOT / "blueprints/reference.yaml").model
    serve = next(s for s in sizing(model) if s.fleet == "serve")
    steps = {s.what: s.result for s in serve.steps}
    assert steps["llama-70b: KV cache of one 8,192-token sequence"] == "2.50 GiB"
    assert steps["llama-70b: smallest tensor parallel"] == "TP 4 on H100-80GB"
    assert steps["llama-70b: replicas and nodes"] == "2 replicas on 1 node"
