"""Golden diffs: what `fleetform diff` tells a reviewer for the changes reviewers meet most, in text,
markdown and JSON, kept in tests/golden-diff/ and reviewed like a pull request when they change.

Regenerate after an intended change with `FLEETFORM_UPDATE_GOLDEN=1 python -m pytest
tests/test_golden_diff.py`, then read `git diff tests/golden-diff` as a reviewer would.
"""

from __future__ import annotations

import json
import os

import pytest

from conftest import ROOT
from fleetform.commands.diff import compute, render_text
from fleetform.commands.plan import build

REF = ROOT / "blueprints/reference.yaml"
GOLDEN = ROOT / "tests/golden-diff"


def _edit(old: str, new: str):
    def apply(text: str) -> str:
        assert old in text, old
        return text.replace(old, new, 1)
    return apply


RENAME_OLD = "  - name: serve\n    role: inference\n"
RENAME_NEW = "  - name: chat\n    renamed_from: [serve]\n    role: inference\n"
MODEL = """      - name: qwen-7b
        image: vllm/vllm-openai:v0.11.0
        model: Qwen/Qwen2.5-7B-Instruct
        model_params_billion: 7.6
        precision: bf16
        tensor_parallel: 1
        max_model_len: 8192
        replicas: {min: 1, max: 2}
        autoscale:
          metric: queue_depth
          target_per_replica: 5
"""

CASES = {
    # an inference fleet turns EKS node auto repair off: enabled false is sent, no node restarts
    "auto-repair-off": _edit("    models:\n      - name: llama-70b\n",
                             "    health: {auto_repair: false}\n    models:\n      - name: llama-70b\n"),
    # on AWS a subnet cannot move: the subnets and everything in them are replaced, FSx data included
    "availability-zone": _edit("availability_zone: us-east-1a", "availability_zone: us-east-1b"),
    # a training fleet's NCCL setting: new rendered files, no node of any fleet rolls
    "nccl-setting": _edit("      env: {}  ", '      env: {NCCL_NVLS_ENABLE: "0"}  '),
    # fleets renamed with renamed_from keep every resource (the controller restarts: its user data names the fleet)
    "rename": lambda text: _edit(RENAME_OLD, RENAME_NEW)(
        _edit("  - name: train\n    role: training", "  - name: pretrain\n    renamed_from: [train]\n    role: training")(text)),
    # the serving fleet from p5 to p4d: cost and sizing deltas on both sides
    "p5-to-p4d": _edit("  - name: serve\n    role: inference\n    instance_type: p5.48xlarge\n",
                       "  - name: serve\n    role: inference\n    instance_type: p4d.24xlarge\n"),
    # a new metadata.name is a new cluster id (<name>_<stack>): the same stack replaces the EKS cluster, the buckets
    # and file systems named after the blueprint, and everything built on them; diff says so in plain words
    "blueprint-renamed": _edit("  name: llm-70b  ", "  name: llm-70c  "),
    # a model added to the small-models fleet
    "model-added": _edit("        hf_token_secret: hf-token   # Meta's models are gated: without a token the download "
                         "gets HTTP 401\n", "        hf_token_secret: hf-token\n" + MODEL),
}


@pytest.fixture(scope="module")
def base():
    result, built = build(str(REF), display="blueprints/reference.yaml")
    assert built is not None, [f.to_text() for f in result.findings]
    return built


@pytest.fixture(scope="module")
def base_result():
    result, built = build(str(REF), display="blueprints/reference.yaml")
    assert built is not None, [f.to_text() for f in result.findings]
    return result, built


@pytest.mark.parametrize("case", sorted(CASES))
def test_diff_matches_golden(case, base_result, tmp_path):
    path = tmp_path / f"{case}.yaml"
    path.write_text(CASES[case](REF.read_text()))
    result, built = build(str(path), display=f"{case}.yaml")  # findings name the case, not a temporary path
    assert built is not None, [f.to_text() for f in result.findings]
    # with both sides' validation results, as `fleetform diff` calls it: disruptions, model swaps, the
    # change's own findings and the diagram need the models
    data = compute("blueprints/reference.yaml", base_result[1], f"{case}.yaml", built, base_result[0], result)
    outputs = {
        "txt": render_text(data, markdown=False),
        "md": render_text(data, markdown=True),
        "json": json.dumps({k: v for k, v in data.items() if not k.startswith("_")}, indent=2, sort_keys=True) + "\n",
    }
    for ext, text in outputs.items():
        golden = GOLDEN / f"{case}.{ext}"
        if os.environ.get("FLEETFORM_UPDATE_GOLDEN"):
            golden.parent.mkdir(exist_ok=True)
            golden.write_text(text)
        assert golden.read_text() == text, (f"fleetform diff for {case} differs from tests/golden-diff/{case}.{ext}; "
                                            "if intended, regenerate (FLEETFORM_UPDATE_GOLDEN=1) and review the diff")


def _diff(case: str, base, tmp_path) -> dict:
    path = tmp_path / f"{case}.yaml"
    path.write_text(CASES[case](REF.read_text()))
    _, built = build(str(path), display=f"{case}.yaml")
    return compute("blueprints/reference.yaml", base, f"{case}.yaml", built)


def test_a_rename_with_renamed_from_replaces_nothing(base, tmp_path):
    data = _diff("rename", base, tmp_path)
    counts = data["summary"]["resources"]
    assert (counts["replace"], counts["create"], counts["delete"]) == (0, 0, 0), data["resources"]
    # no node is replaced or rolled; the Slurm controller restarts, as its user data names the fleet
    assert data["summary"]["effects"] == ["stops and starts instance pretrain-controller (m7i.4xlarge)"]


def test_a_rendered_file_change_rolls_no_node(base, tmp_path):
    data = _diff("nccl-setting", base, tmp_path)
    assert data["summary"]["resources"]["replace"] == 0
    assert data["summary"]["effects"] == [], data["summary"]["effects"]
    assert "train/nccl.env" in [f["path"] for f in data["rendered_files"]]
