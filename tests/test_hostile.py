"""Hostile input (issue 24): what an attacker or a careless user tried that crashed fleetform or
widened what it accepted, each with the guarantee that keeps it out."""

from __future__ import annotations

import copy
import itertools
import json
from pathlib import Path

import pytest
import yaml

from conftest import EXAMPLES
from fleetform import bases, cli, pipeline
from fleetform.findings import Severity
from fleetform.loader import load
from fleetform.rules import REGISTRY, UNIQUE_NAMES, Reporter, Rule, all_rules, run


def _plain(data):
    return json.loads(json.dumps(data, default=lambda o: dict(o) if hasattr(o, "keys") else list(o)))


def _seed(path: Path | str) -> dict:
    doc = load(path)
    if "extends" in doc.data:
        doc = bases.resolve(doc)
    data = _plain(doc.data)
    data.pop("extends", None)
    return data


def _named_lists(data, path=()):
    """Every list of named items (fleets, storage, models, partitions, switches) and where it is."""
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _named_lists(value, path + (key,))
    elif isinstance(data, list):
        if data and all(isinstance(x, dict) and isinstance(x.get("name"), str) for x in data):
            yield path, len(data)
        for index, value in enumerate(data):
            yield from _named_lists(value, path + (index,))


def _at(data, path):
    for key in path:
        data = data[key]
    return data


def _seeds(tmp: Path):
    """The shipped blueprints, and the variant that names explicit topology switches."""
    from variants import VARIANTS

    for path in EXAMPLES:
        yield path.name, _seed(path)
    variant = tmp / "onprem-roce-switches.yaml"
    variant.write_text(VARIANTS["onprem-roce-switches"])
    yield variant.name, _seed(variant)


def _duplicate_mutants():
    """Each seed blueprint with one name made twice: an item renamed to another's name (a
    training fleet named as a serving one, ...), or an item of each named list copied beside it."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        seeds = list(_seeds(Path(tmp)))
    for name, seed in seeds:
        for path, count in _named_lists(seed):
            for i, j in itertools.permutations(range(count), 2):
                mutant = copy.deepcopy(seed)
                _at(mutant, path)[j]["name"] = _at(seed, path)[i]["name"]
                yield f"{name}:{'.'.join(map(str, path))}[{j}]=[{i}]", mutant
            for i in range(count):
                mutant = copy.deepcopy(seed)
                _at(mutant, path).append(copy.deepcopy(_at(seed, path)[i]))
                yield f"{name}:{'.'.join(map(str, path))}+[{i}]", mutant


DUPLICATE_MUTANTS = list(_duplicate_mutants())


def test_the_duplicate_mutants_cover_every_kind_of_name():
    kinds = {label.split(":")[1].split("[")[0].split("+")[0].rsplit(".", 1)[-1] for label, _ in DUPLICATE_MUTANTS}
    kinds = {k if not k.isdigit() else "?" for k in kinds}
    assert {"fleets", "storage", "models", "partitions", "switches"} <= kinds, kinds


def test_no_rule_crashes_on_duplicate_names_of_any_kind(tmp_path):
    """Issue 24 item 1: two fleets of one name, one training and one serving, made `validate` exit 3
    (cluster-version read a Slurm scheduler's Kubernetes version). Every rule, present and future,
    is run over every kind of duplicate: each gives exit 1 with the unique-names finding."""
    failures = []
    for label, mutant in DUPLICATE_MUTANTS:
        path = tmp_path / "mutant.yaml"
        path.write_text(yaml.safe_dump(mutant, sort_keys=False))
        try:
            result = pipeline.check(path)
        except Exception as err:  # noqa: BLE001 - the point is to collect every crash
            failures.append(f"{label}: {type(err).__name__}: {err}")
            continue
        rules = {f.rule for f in result.findings if f.severity is Severity.ERROR}
        if UNIQUE_NAMES not in rules and "schema" not in rules:
            failures.append(f"{label}: no unique-names finding: {sorted(rules)}")
    assert not failures, "\n".join(failures)


def test_a_training_and_a_serving_fleet_of_one_name_exit_1(tmp_path, capsys):
    seed = _seed(Path("blueprints/reference.yaml"))
    assert [f["role"] for f in seed["fleets"][:2]] == ["training", "inference"]
    seed["fleets"][1]["name"] = seed["fleets"][0]["name"]
    path = tmp_path / "dup.yaml"
    path.write_text(yaml.safe_dump(seed, sort_keys=False))
    assert cli.main(["validate", str(path)]) == 1
    out = capsys.readouterr()
    assert "fleet name 'train' is used more than once" in out.out and "[unique-names]" in out.out
    assert out.err == ""


def test_every_semantic_rule_needs_unique_names_unless_it_is_that_rule():
    """The guarantee is structural: a rule registered without saying otherwise does not run on a
    model with duplicate names, and every rule's needs are registered (and so run) before it."""
    order = [r.id for r in all_rules()]
    for r in all_rules():
        if r.check is None:
            assert r.needs == ()
            continue
        assert r.id == UNIQUE_NAMES or UNIQUE_NAMES in r.needs, r.id
        for need in r.needs:
            assert REGISTRY[need].check is not None and order.index(need) < order.index(r.id)


def _blueprint_with_duplicate_fleets(tmp_path):
    seed = _seed(Path("blueprints/reference.yaml"))
    seed["fleets"][1]["name"] = seed["fleets"][0]["name"]
    path = tmp_path / "dup.yaml"
    path.write_text(yaml.safe_dump(seed, sort_keys=False))
    doc = load(path)
    from fleetform.catalog import load_catalog
    from fleetform.resolve import resolve

    return resolve(doc, load_catalog()), doc


def test_a_rule_that_would_crash_on_duplicates_does_not_run(tmp_path, monkeypatch):
    """The next rule making cluster-version's mistake: registered the ordinary way, it is not run."""
    ran = []

    def fragile(bp, report: Reporter) -> None:
        ran.append(bp.name)
        raise AssertionError("ran on duplicate names")

    registry = dict(REGISTRY)
    from fleetform import rules as engine

    monkeypatch.setattr(engine, "REGISTRY", registry)
    engine.rule("zz-fragile", "error", "a rule written without a thought of duplicates")(fragile)
    assert registry["zz-fragile"].needs == (UNIQUE_NAMES,)
    bp, doc = _blueprint_with_duplicate_fleets(tmp_path)
    findings = run(bp, doc)
    assert ran == [] and {f.rule for f in findings} == {UNIQUE_NAMES}
    # a rule that needs a rule that did not run does not run either
    registry["zz-after"] = Rule("zz-after", Severity.ERROR, "x", "rules", fragile, ("zz-fragile",))
    run(bp, doc)
    assert ran == []
    # and on a blueprint without duplicates it runs
    with pytest.raises(AssertionError, match="ran on duplicate names"):
        run(*_reference_model())


def _reference_model():
    from fleetform.catalog import load_catalog
    from fleetform.resolve import resolve

    doc = load("blueprints/reference.yaml")
    return resolve(doc, load_catalog()), doc


def test_a_rule_needing_an_unregistered_or_later_rule_is_refused(monkeypatch):
    from fleetform import rules as engine

    monkeypatch.setattr(engine, "REGISTRY", dict(REGISTRY))
    engine.check_needs()
    engine.rule("zz-orphan", "error", "x", needs=("no-such-rule",))(lambda bp, report: None)
    with pytest.raises(RuntimeError, match="needs 'no-such-rule'"):
        engine.check_needs()
    monkeypatch.setattr(engine, "REGISTRY", dict(REGISTRY))
    engine.rule("zz-early", "error", "x", needs=("zz-late",))(lambda bp, report: None)
    engine.rule("zz-late", "error", "x")(lambda bp, report: None)
    with pytest.raises(RuntimeError, match="needs 'zz-late'"):
        engine.check_needs()


def test_a_waiver_of_a_rule_that_did_not_run_is_not_called_unused(tmp_path):
    seed = _seed(Path("blueprints/reference.yaml"))
    seed["fleets"][1]["name"] = seed["fleets"][0]["name"]
    seed["waivers"] = [{"rule": "ssh-open", "reason": "a bastion is in front of the nodes"}]
    path = tmp_path / "dup.yaml"
    path.write_text(yaml.safe_dump(seed, sort_keys=False))
    result = pipeline.check(path)
    assert {f.rule for f in result.findings} == {UNIQUE_NAMES}


# --- item 2: extra_args is checked as vLLM's parser reads the whole argument vector ---------------

ARGV_REFUSED = {
    # vLLM 0.11.0's parser (FlexibleArgumentParser over argparse) refuses each at start
    "a stray positional (the model is fleetform's)": (["--enable-prefix-caching", "stray"], [1], "neither a flag"),
    "a value the flag before it does not take": (["--max-num-seqs", "256", "512"], [2], "neither a flag"),
    "a flag without its value, last": (["--max-num-seqs"], [0], "--max-num-seqs needs a value"),
    "a flag without its value, before another flag": (["--max-num-seqs", "--enable-prefix-caching"], [0],
                                                       "--max-num-seqs needs a value"),
    "a value given to a BooleanOptionalAction flag": (["--enable-prefix-caching=true"], [0], "takes no value"),
    "a value given to a store_true flag": (["--disable-log-stats=1"], [0], "takes no value"),
    "a nargs='+' flag with no value": (["--ignore-patterns", "--enable-prefix-caching"], [0],
                                       "needs one or more values"),
    "a value outside the flag's choices": (["--kv-cache-dtype", "fp9"], [1], "takes one of"),
    "an int choice that is not one": (["--block-size", "17"], [1], "takes one of 1, 8, 16"),
    "a non-integer for an int flag": (["--max-num-seqs=many"], [0], "takes an integer"),
    "a non-number for a float flag": (["--swap-space", "lots"], [1], "takes a number"),
    "a decimal with a binary suffix": (["--max-num-batched-tokens", "1.5K"], [1], "takes an integer"),
    "a --flag.key form of a flag that is not JSON": (["--max-num-seqs.x", "3"], [0], "no --flag.key form"),
    "a --json.key form without its value": (["--compilation-config.level"], [0], "needs a value"),
    "-O without a value": (["-O"], [0], "-O needs a value"),
    # vLLM's JSON types (parse_dataclass, json.loads, union_dict_and_str) all parse a {...} value as JSON:
    # checked against the parser built from the 0.11.0 wheel, each of these exits 2 at start
    # optional_type takes '' and 'None' for an Optional field only (--seed); --max-num-seqs is an int
    "'None' for an int flag that is not Optional": (["--max-num-seqs", "None"], [1], "takes an integer"),
    "'' for a float flag that is not Optional": (["--swap-space="], [0], "takes a number"),
    "'None' for a size flag that is not Optional": (["--max-num-batched-tokens=None"], [0], "takes an integer"),
    "a JSON config with a trailing comma": (["--compilation-config", '{"level": 3,}'], [1], "takes a JSON object"),
    "a JSON config in Python's quotes": (["--limit-mm-per-prompt={'image': 2}"], [0], "takes a JSON object"),
    "a JSON-or-text flag given a broken object": (["--hf-overrides", "{a: 1}"], [1], "takes a JSON object"),
}

ARGV_ACCEPTED = [
    ["--enable-prefix-caching", "--max-num-seqs", "256", "--kv-cache-dtype=fp8"],
    ["--no-enable-prefix-caching", "--max_num_seqs=8"],  # the BooleanOptionalAction twin; `_` read as `-`
    ["--seed", "-1"],  # argparse takes a negative number as a value: no option looks like one
    ["-O3"], ["-O", "3"], ["-O.level=3"], ["--compilation-config.level", "3", "--compilation-config.cudagraph_mode", "x"],
    ["--compilation-config", '{"level": 3}'], ["--override-generation-config", ' {"temperature": 0.5} '],
    ["--hf-overrides", "a-text-value"],  # union_dict_and_str: without braces it is text
    ["--ignore-patterns", "*.pt", "*.bin", "--enable-prefix-caching"],  # nargs='+' up to the next flag
    ["--hf-token"], ["--hf-token", "hf-x"],  # nargs='?'
    ["--max-num-batched-tokens", "16k"], ["--max-num-batched-tokens", "2K"], ["--swap-space=4.5"],
    ["--block-size", "16"], ["--task", "None"], ["--seed", "None"], ["--seed="], ["--rope-theta", "None"],
    ["--chat-template", "-not an option, it has a space"],  # argparse: a '-' item with a space is a value
]


@pytest.mark.parametrize("case", list(ARGV_REFUSED))
def test_argv_vllm_refuses_is_refused(case):
    from fleetform.rules.inference import argv_problems

    argv, indexes, message = ARGV_REFUSED[case]
    problems = argv_problems(argv)
    assert [i for i, _, _ in problems] == indexes, problems
    assert all(message in m for _, m, _ in problems), problems


@pytest.mark.parametrize("argv", ARGV_ACCEPTED, ids=" ".join)
def test_argv_vllm_accepts_is_accepted(argv):
    from fleetform.rules.inference import argv_problems

    assert argv_problems(argv) == []


def test_the_flags_table_records_vllms_arity():
    """providers/vllm-serve-flags.tsv, written by tests/tools/vllm_serve_flags.py from vLLM 0.11.0's
    own parser: a bool field's flag and its --no- twin take no value (argparse.BooleanOptionalAction,
    vllm/engine/arg_utils.py _compute_kwargs), list fields take nargs='+', Literal fields choices."""
    from fleetform.rules.inference import vllm_options

    options = vllm_options()
    assert all(o.arity in ("0", "1", "?", "+") and (o.arity == "0") == (o.value == "") for o in options.values())
    for flag, option in options.items():
        if flag.startswith("--no-") and "--" + flag[5:] in options:
            assert option.arity == "0" and options["--" + flag[5:]].arity == "0", flag
    assert options["--enable-prefix-caching"].arity == "0" and options["--max-num-seqs"].value == "int"
    assert options["--served-model-name"].arity == "+" and options["--hf-token"].arity == "?"
    assert options["--kv-cache-dtype"].choices[:2] == ("auto", "bfloat16")
    assert options["--compilation-config"].value == options["-O"].value == "json"
    assert options["--guided-decoding-backend"].status == "deprecated"  # the parser has it; the table lacked it


def test_the_servers_whole_argv_is_one_vllm_accepts(tmp_path):
    """Not only extra_args: the argv fleetform renders for each model (its own flags included) is read
    the way vLLM reads it, and nothing in it is refused."""
    from fleetform.render import render
    from fleetform.rules.inference import argv_problems

    seen = 0
    for source in EXAMPLES:
        result = pipeline.check(source)
        for name, data in render(result.model).items():
            if name.endswith("-deployment.yaml") and not name.endswith(("-epp-deployment.yaml", "-bbr-deployment.yaml",
                                                                       "-semrouter-deployment.yaml")):
                # a gateway's picker, body-based router or semantic router: not vLLM
                container = yaml.safe_load(data)["spec"]["template"]["spec"]["containers"][0]
                assert container["command"] == ["vllm", "serve"] and not container["args"][0].startswith("-")
                assert argv_problems(container["args"][1:], owned=frozenset()) == [], name
                seen += 1
    assert seen >= 3


def test_a_flag_without_its_value_in_a_blueprint_is_a_finding(tmp_path, capsys):
    text = Path("blueprints/reference.yaml").read_text().replace(
        "        max_model_len: 8192\n        replicas: {min: 2, max: 20}\n",
        "        max_model_len: 8192\n        replicas: {min: 2, max: 20}\n"
        "        extra_args: [--max-num-seqs, --enable-prefix-caching, stray]\n", 1)
    path = tmp_path / "bp.yaml"
    path.write_text(text)
    assert cli.main(["validate", str(path)]) == 1
    lines = [line for line in capsys.readouterr().out.splitlines() if "[extra-args]" in line]
    assert len(lines) == 2, lines
    assert "fleets[1].models[0].extra_args[0]: --max-num-seqs needs a value" in lines[0]
    assert "fleets[1].models[0].extra_args[2]: 'stray' is neither a flag nor a flag's value" in lines[1]


# --- item 3: an S3 weights uri grants exactly the folder the model is in -------------------------

def _with_weights(uri: str, tmp_path: Path) -> Path:
    text = Path("blueprints/reference.yaml").read_text()
    old = "        hf_token_secret: hf-token   # name of an existing Secret; never a token value\n"
    assert old in text
    path = tmp_path / "weights.yaml"
    path.write_text(text.replace(old, f"        weights: {{source: s3, uri: \"{uri}\"}}\n", 1))
    return path


@pytest.mark.parametrize("uri", ["s3://acme-weights/llama", "s3://acme-weights/llama*/", "s3://acme-weights/*",
                                 "s3://acme-weights/ll?ma/", "s3://acme-weights/llama//", "s3://acme-weights",
                                 "s3://acme-weights/models/llama"])
def test_a_weights_uri_that_would_widen_the_grant_is_refused(uri, tmp_path):
    """`s3://bucket/llama` became the grant `llama*`, which reaches `llama-secret/` too; `*` and `?`
    are IAM wildcards in a Resource and in StringLike (IAM User Guide, "IAM JSON policy elements:
    Resource": wildcards * and ? in ARNs)."""
    result = pipeline.check(_with_weights(uri, tmp_path))
    assert [(f.rule, f.path) for f in result.findings if f.severity is Severity.ERROR] == [
        ("schema", "fleets[1].models[0].weights.uri")], [f.to_text() for f in result.findings]


@pytest.mark.parametrize("uri", ["s3://acme-weights/", "s3://acme-weights/llama/", "s3://acme-weights/meta/llama-3.1-70b/"])
def test_a_weights_folder_is_accepted(uri, tmp_path):
    assert pipeline.check(_with_weights(uri, tmp_path)).ok


def test_the_weights_grant_is_the_folder_and_nothing_wider():
    from fleetform.providers.aws.kube import _weights_policy

    policy = json.loads(_weights_policy(("s3://b/x/llama/", "s3://a/")))
    assert policy["Statement"] == [
        {"Sid": "Read0", "Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::a/*"},
        {"Sid": "List0", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::a",
         "Condition": {"StringLike": {"s3:prefix": ["*"]}}},
        {"Sid": "Read1", "Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/x/llama/*"},
        {"Sid": "List1", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::b",
         "Condition": {"StringLike": {"s3:prefix": ["x/llama/*"]}}}]
    for uri in ("s3://b/llama", "s3://b/ll*/", "s3://b/l?/", "s3:///x/", "https://b/x/"):
        with pytest.raises(ValueError, match="not an S3 folder"):
            _weights_policy((uri,))


@pytest.mark.parametrize("renames, where", [
    ({1: ["small-models"]}, "fleets[1].renamed_from[0]"),  # an earlier name that is another fleet's name
    ({1: ["old"], 2: ["old"]}, "fleets[2].renamed_from[0]"),  # one earlier name of two fleets
])
def test_an_earlier_name_of_two_fleets_is_refused(tmp_path, capsys, renames, where):
    """A fleet's earlier names are its cloud_name: its node label `fleetform.dev/fleet`, its device
    plugin config and its Pulumi aliases. Shared by two fleets, each fleet's pods selected the
    other's nodes and `pulumi up` met one alias twice; validate accepted it (exit 0)."""
    seed = _seed(Path("blueprints/reference.yaml"))
    for index, names in renames.items():
        seed["fleets"][index]["renamed_from"] = names
    path = tmp_path / "renamed.yaml"
    path.write_text(yaml.safe_dump(seed, sort_keys=False))
    assert cli.main(["validate", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"{where}: fleet '" in out and "[unique-names]" in out


def test_one_model_name_in_one_namespace_of_two_fleets_is_refused(tmp_path, capsys):
    """Both fleets rendered Deployment, Service, PDB ... `llama-70b` in namespace `llm` of the one EKS
    cluster, each applied over the other; validate accepted it (exit 0)."""
    seed = _seed(Path("blueprints/reference.yaml"))
    seed["fleets"][2]["scheduler"]["namespace"] = seed["fleets"][1]["scheduler"]["namespace"]
    seed["fleets"][2]["models"][0]["name"] = seed["fleets"][1]["models"][0]["name"]
    path = tmp_path / "shared-namespace.yaml"
    path.write_text(yaml.safe_dump(seed, sort_keys=False))
    assert cli.main(["validate", str(path)]) == 1
    out = capsys.readouterr().out
    assert "fleets[2].models[0].name: model name 'llama-70b' is used by fleet 'serve' too" in out
    assert "[unique-names]" in out
    # the same model name in another namespace is two sets of objects, and fine
    seed["fleets"][2]["scheduler"]["namespace"] = "small-models"
    path.write_text(yaml.safe_dump(seed, sort_keys=False))
    assert cli.main(["validate", str(path)]) == 0
