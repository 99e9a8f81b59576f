"""The blueprint diagram (fleetform/diagram.py) that plan and diff put in their markdown, judged by
Mermaid's own parser: mermaid 11.17.2 with jsdom (tests/tools, `npm ci --prefix tests/tools`; .ci/run
installs them), run by tests/tools/mermaid-parse.mjs. It parses each diagram as a renderer does
(entity codes and label sanitizing included) and says which vertices, subgraphs and edges it made,
so hostile blueprint names are checked to stay label text, not only to parse."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import unicodedata

import pytest

from conftest import EXAMPLES, ROOT
from fleetform import diagram
from fleetform.commands.diff import compute, render_text
from fleetform.commands.plan import build, text_lines
from fleetform.pipeline import check
from variants import VARIANTS

PARSER = ROOT / "tests/tools/mermaid-parse.mjs"
MERMAID = ROOT / "tests/tools/node_modules/mermaid/package.json"
REF = ROOT / "blueprints/reference.yaml"
CORPUS = sorted((ROOT / "tests/corpus").glob("*.yaml"))


def parse(sources: list[str]) -> list[dict]:
    """Mermaid's verdict on each diagram: {"error": None or the message, "vertices", "subgraphs", "edges"}."""
    node = shutil.which("node")
    if node is None or not MERMAID.is_file():
        message = "node or the mermaid package is missing (npm ci --prefix tests/tools)"
        if os.environ.get("CI"):
            pytest.fail(f"{message}; CI must run this test: .ci/run installs them")
        pytest.skip(message)
    result = subprocess.run([node, str(PARSER)], input=json.dumps(sources), capture_output=True, text=True,
                            timeout=300)
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


def decoded(label: str) -> list[str]:
    """A label as it is shown: Mermaid's entity placeholders (its encodeEntities) decoded, <br> a line break."""
    label = re.sub(r"ﬂ°°(\d+)¶ß", lambda m: chr(int(m.group(1))), label)
    return label.split("<br>")


def assert_parses(sources: dict[str, str]) -> list[dict]:
    results = parse(list(sources.values()))
    broken = {name: r["error"] for name, r in zip(sources, results, strict=True) if r["error"] is not None}
    assert not broken, broken
    return results


def test_a_broken_diagram_fails_the_parser():
    """The negative control: the parser does judge (an unclosed label, an unquoted bracket)."""
    results = parse(['flowchart LR\n  n1["x --> n2\n', "flowchart LR\n  n1[a [b] c] --> n2\n",
                     "flowchart LR\n  n1 --> n2\n"])
    assert results[0]["error"] and results[1]["error"], results
    assert results[2]["error"] is None


def _models():
    out = {}
    for path in EXAMPLES + CORPUS:
        result = check(path)
        if result.model is not None:
            out[str(path.relative_to(ROOT))] = result.model
    return out


def test_every_shipped_blueprint_and_corpus_diagram_parses(tmp_path):
    models = _models()
    for name, text in VARIANTS.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(text)
        result = check(path)
        if result.model is not None:
            models[f"variant {name}"] = result.model
    assert len(models) > len(EXAMPLES) + 20, sorted(models)  # the corpus's valid files count too
    results = assert_parses({name: diagram.mermaid(diagram.graph(model)) for name, model in models.items()})
    for (name, model), result in zip(models.items(), results, strict=True):
        # one subgraph per fleet, each fleet's nodes in it
        titles = {decoded(title)[0] for _, title, _ in result["subgraphs"]}
        for fleet in model.fleets:
            assert any(t.startswith(f"{fleet.role} fleet {fleet.name} ") for t in titles), (name, titles)


@pytest.fixture(scope="module")
def reference():
    result, built = build(str(REF), display="blueprints/reference.yaml")
    assert built is not None
    return result, built


def test_the_reference_plan_shows_its_diagram_in_markdown_only(reference):
    _, (data, _files, _findings) = reference
    source = data["diagram"]
    [result] = assert_parses({"reference": source})
    labels = {tuple(decoded(text)) for _, text in result["vertices"]}
    assert ("6 x p5.48xlarge", "8 x H100-80GB per node", "EFA · capacity-block cr-0a1b2c3d4e5f67890") in labels
    assert ("subnet private", "10.40.0.0/18 · us-east-1a") in labels  # from the recorded plan
    assert any(label[0] == "model llama-70b" and "2-20 replicas x 4 GPUs" in label for label in labels)
    assert any(label[0] == "FSx for Lustre scratch" for label in labels)
    assert any(label[0].startswith("EKS control plane") for label in labels)
    subgraphs = {decoded(title)[0]: members for _, title, members in result["subgraphs"]}
    assert set(subgraphs) == {"AWS us-east-1 · VPC 10.40.0.0/16", "storage", "EKS cluster llm-70b · Kubernetes 1.33",
                              "training fleet train · Slurm", "inference fleet serve · Kubernetes",
                              "inference fleet small-models · Kubernetes"}
    markdown = "\n".join(text_lines(data, True))
    assert "\n#### Diagram: networks, fleets, storage and schedulers\n\n```mermaid\n" + source + "```\n" in markdown
    assert "mermaid" not in "\n".join(text_lines(data, False))
    assert len(markdown) < diagram.MAX_TEXT


HOSTILE = ['end', 'a"]; click n1 call alert(1); n9["', "```\n# heading", "<img src=x onerror=alert(1)>", "#quot;",
           "x --> y", "subgraph", "名前-ü", "%%{init: {'theme': 'dark'}}%%", "a\u202eb", "style n1 fill:#f00", "[*]",
           "a;b", "|x|", "{x}", "(x)", "\\", "graph TD"]


def _hostile(model, text: str):
    """The model with user text (names, the model id, the site, partitions) replaced by `text`."""
    fleets = []
    for i, fleet in enumerate(model.fleets):
        models = tuple(dataclasses.replace(m, name=f"{text}{j}", model=text) for j, m in enumerate(fleet.models))
        sched = fleet.scheduler
        if getattr(sched, "type", "") == "slurm":
            sched = dataclasses.replace(sched, cluster_name=text, partitions=tuple(
                dataclasses.replace(p, name=text) for p in sched.partitions))
        fleets.append(dataclasses.replace(fleet, name=f"{text}{i}", models=models, scheduler=sched,
                                          storage=tuple(f"{text}{s}" for s in fleet.storage)))
    storage = tuple(dataclasses.replace(s, name=f"{text}{s.name}", mount_path=text) for s in model.storage)
    return dataclasses.replace(model, fleets=tuple(fleets), storage=storage, region=text, site=text)


@pytest.mark.parametrize("source", [REF, ROOT / "blueprints/onprem-ib.yaml"], ids=lambda p: p.stem)
def test_hostile_names_stay_label_text(source):
    """Quotes, brackets, `#`, backticks (the Markdown fence), HTML, line breaks, bidi overrides, words
    Mermaid reserves and its own syntax, in every name the diagram prints: the parser makes the same
    vertices, subgraphs and edges as for plain names, and each label reads the hostile text back."""
    model = check(source).model
    plain = diagram.graph(_hostile(model, "plain"))
    sources = {"plain": diagram.mermaid(plain)}
    graphs = {}
    for text in HOSTILE:
        graphs[text] = diagram.graph(_hostile(model, text))
        sources[text] = diagram.mermaid(graphs[text])
        assert "```" not in sources[text] and "\u202e" not in sources[text]
    results = dict(zip(sources, assert_parses(sources), strict=True))
    shape = lambda r: ([v[0] for v in r["vertices"]], [(s[0], s[2]) for s in r["subgraphs"]], r["edges"])  # noqa: E731
    for text in HOSTILE:
        assert shape(results[text]) == shape(results["plain"]), text
        shown = {v[0]: decoded(v[1]) for v in results[text]["vertices"]}
        ids = {key: f"n{i}" for i, key in enumerate(graphs[text].nodes, 1)}
        for key, node in graphs[text].nodes.items():
            # control and format characters (line breaks, bidi overrides) are shown as U+FFFD
            expected = ["".join("\ufffd" if unicodedata.category(c).startswith("C") else c for c in line)
                        for line in node.lines]
            assert shown[ids[key]] == expected, (text, key)


def test_text_escapes_what_is_not_plain():
    assert diagram.text('a"b') == "a#34;b"
    assert diagram.text("x#y;") == "x#35;y#59;"
    assert diagram.text("`<>&") == "#96;#60;#62;#38;"
    assert diagram.text("a\nb") == "a#65533;b"
    assert diagram.text("名前 p5.48xlarge 10.0.0.0/16 (x)") == "名前 p5.48xlarge 10.0.0.0/16 (x)"


def _diff(case: str, text: str, reference, tmp_path) -> dict:
    path = tmp_path / f"{case}.yaml"
    path.write_text(text)
    result, built = build(str(path), display=f"{case}.yaml")
    assert built is not None, [f.to_text() for f in result.findings]
    return compute("blueprints/reference.yaml", reference[1], f"{case}.yaml", built, reference[0], result)


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


def _added_removed(ref: str) -> str:
    """The serve fleet removed, a model added to small-models."""
    text = ref.split("  - name: serve\n")[0] + "  - name: small-models\n" + ref.split("  - name: small-models\n")[1]
    anchor = "          target_per_replica: 5\n        hf_token_secret: hf-token   #"
    assert anchor in text
    return text.replace(anchor, "          target_per_replica: 5\n" + MODEL + "        hf_token_secret: hf-token   #")


def _marked(source: str) -> dict[str, set[str]]:
    """class name -> the ids it is applied to."""
    out: dict[str, set[str]] = {}
    for line in source.splitlines():
        if line.startswith("  class "):
            ids, name = line[len("  class "):].rsplit(" ", 1)
            out[name] = set(ids.split(","))
    return out


def test_a_diff_marks_what_the_change_touches(reference, tmp_path):
    ref = REF.read_text()
    cases = {
        # the zone: subnets, FSx, the controller and node groups replaced, FSx's data lost
        "zone": ref.replace("availability_zone: us-east-1a", "availability_zone: us-east-1b", 1),
        # a model added to small-models, and the checkpoints bucket and the serve fleet removed
        "added-removed": _added_removed(ref),
    }
    datas = {case: _diff(case, text, reference, tmp_path) for case, text in cases.items()}
    results = dict(zip(datas, assert_parses({c: d["diagram"] for c, d in datas.items()}), strict=True))
    for case, data in datas.items():
        md = render_text(data, markdown=True)
        # never folded: GitHub fails to draw labelled links inside a closed <details> (mermaid-js/mermaid#3504)
        assert f"#### Diagram: what the change touches\n\n```mermaid\n{data['diagram']}```\n" in md
        assert "```mermaid" not in render_text(data, markdown=False)
        assert len(md) <= 65536
    labels = {case: {v[0]: decoded(v[1]) for v in r["vertices"]} for case, r in results.items()}

    def ids_of(case: str, first_line: str) -> set[str]:
        return {vid for vid, lines in labels[case].items() if lines[0] == first_line}

    zone = _marked(datas["zone"]["diagram"])
    [fsx] = ids_of("zone", "FSx for Lustre scratch")
    assert fsx in zone["replaced"] and labels["zone"][fsx][-1] == "replaced: data loss"
    [subnet] = ids_of("zone", "subnet private")
    assert subnet in zone["replaced"]
    [controller] = ids_of("zone", "Slurm controller (llm70b)")
    assert labels["zone"][controller][-1] == "replaced: replace with state"
    [bucket] = ids_of("zone", "S3 bucket checkpoints")
    assert all(bucket not in ids for ids in zone.values())  # S3 is regional but a bucket keeps its data: untouched
    assert [v[1] for v in results["zone"]["vertices"] if v[0].startswith("l")] == ["replaced (new id)",
                                                                                   "updated in place"]

    moved = _marked(datas["added-removed"]["diagram"])
    [qwen] = ids_of("added-removed", "model qwen-7b")
    assert qwen in moved["added"]
    [serve_model] = ids_of("added-removed", "model llama-70b")
    assert serve_model in moved["removed"]  # the old side's model, drawn and marked removed
    serve_group = next(s[0] for s in results["added-removed"]["subgraphs"]
                       if decoded(s[1])[0] == "inference fleet serve · Kubernetes")
    assert serve_group in moved["removed"]
    # small-models stays: a resource created in it (qwen's Service) updates it, and the KEDA release deleted
    # with serve updates the cluster's add-ons; neither is marked added or removed
    small = next(s[0] for s in results["added-removed"]["subgraphs"]
                 if decoded(s[1])[0] == "inference fleet small-models · Kubernetes")
    [helm] = [vid for vid, lines in labels["added-removed"].items() if lines[0].startswith("Helm: ")]
    assert small in moved["updated"] and helm in moved["updated"]


def test_a_diagram_past_mermaids_limits_is_named_not_shown():
    source = "flowchart LR\n" + "".join(f"  n{i} --> n{i + 1}\n" for i in range(600))
    lines = diagram.markdown(source, "Diagram")
    assert not any("```mermaid" in line for line in lines)
    assert "600 edges, more than Mermaid renders (500)" in lines[-1]
    short = diagram.markdown("flowchart LR\n  n1 --> n2\n", "Diagram")
    assert short == ["", "#### Diagram", "", "```mermaid", "flowchart LR\n  n1 --> n2", "```"]


def _luminance(hex_color: str) -> float:
    """WCAG 2 relative luminance of #rrggbb."""
    def channel(v: int) -> float:
        c = v / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


@pytest.mark.parametrize("mark", diagram.MARKS)
def test_a_marked_part_is_readable_in_light_and_dark_themes(mark):
    """A mark's style sets the text color with its fill: GitHub draws Mermaid with the dark theme for readers in
    dark mode, whose label color (#ccc) on these light fills was a contrast of about 1.4:1 (rendered in Chromium
    with mermaid 11.17.2); WCAG 2 asks 4.5:1 for text."""
    props = dict(item.split(":", 1) for item in diagram.STYLES[mark].split(","))
    assert "color" in props, diagram.STYLES[mark]
    fill, color = _luminance(props["fill"]), _luminance(props["color"])
    assert (max(fill, color) + 0.05) / (min(fill, color) + 0.05) >= 4.5, diagram.STYLES[mark]


def test_a_diff_comment_leaves_the_diagram_out_rather_than_pass_githubs_limit(reference):
    """The comment keeps everything before the file diffs whole; the diagram is part of that and grows with the
    fleets and models (28 inference fleets of 4 models: a 22,586-character diagram made the comment 68,060
    characters, 45,370 without it): past GitHub's 65,536 it is left out, and says so, before the comment is."""
    data = compute("blueprints/reference.yaml", reference[1], "same.yaml", reference[1], reference[0], reference[0])
    change = {"action": "update", "type": "aws:ec2/instance:Instance", "name": "x", "inputs": [
        {"path": "tags.note", "old": "a" * 80, "new": "b" * 80, "forces_replacement": False}]}
    data["resources"] = [change] * 400  # about 44,000 characters before the file diffs
    data["diagram"] = "flowchart LR\n" + "".join(f'  n{i}["{"x" * 40}"]\n' for i in range(700))  # 36,000
    assert diagram.too_big(data["diagram"]) is None
    md = render_text(data, markdown=True)
    assert len(md) <= 65536, len(md)
    assert "```mermaid" not in md
    assert "_Not shown: with it this comment would be longer than GitHub's limit (65,536 characters)" in md
    data["resources"] = [change] * 10
    assert "```mermaid" in render_text(data, markdown=True)  # it is left out only when it does not fit


def test_a_models_own_kubernetes_files_mark_the_model_not_its_fleet():
    """render/k8s.py writes <model>-<kind>.yaml per model: a changed KEDA ScaledObject or HPA (a new target) is
    that model's change; it marked the whole fleet, whose other models and node group it does not touch."""
    model = check(REF).model
    for path, key in {"serve/k8s/llama-70b-scaledobject.yaml": ("fleet", "serve", "model", "llama-70b"),
                      "small-models/k8s/llama-8b-hpa.yaml": ("fleet", "small-models", "model", "llama-8b"),
                      "serve/k8s/llama-70b-pdb.yaml": ("fleet", "serve", "model", "llama-70b"),
                      "serve/k8s/llama-70b-deployment.yaml": ("fleet", "serve", "model", "llama-70b"),
                      "serve/k8s/networkpolicy.yaml": ("fleet", "serve"),
                      "small-models/k8s/mig-parted-config.yaml": ("fleet", "small-models")}.items():
        assert diagram.file_part(model, path) == key, path
