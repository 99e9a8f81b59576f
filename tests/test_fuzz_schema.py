"""Schema-driven fuzzing (issue 19): every field the schema has, set to hostile but schema-valid
values, through validate and render, and every rendered file read as its consumer reads it.

- test_every_field_is_reached: each leaf slot of the live schema (tests/fuzz_schema.py walks it) has
  a sweep case, so a field added to the schema is fuzzed from the day it is added.
- test_sweep: the deterministic sweep, every slot with up to three of its hostile values, each
  string also against its twin (the same blueprint with an inert word in its place): what the
  user wrote is what the consumer reads.
- test_property: hypothesis combines one to three slots per example, with values drawn also from
  the patterns themselves; derandomized, no database, FLEETFORM_FUZZ_EXAMPLES examples (40 unless
  set: `FLEETFORM_FUZZ_EXAMPLES=2000 pytest tests/test_fuzz_schema.py -k property` for a long run).
- test_a_regression_fails_the_sweep: the fuzzer's strength, kept: each injected regression (a
  template printing a name unquoted, delimiters let through, a shell quote dropped, a schema pattern
  loosened, ...) must make the sweep fail; the test reports after how many cases.
"""

from __future__ import annotations

import copy
import os
import re
import time
from collections import Counter
from pathlib import Path

import jinja2
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fuzz_oracles as oracles
import fuzz_schema as fz
from fleetform import plaintext
from fleetform import schema as schema_module
from fleetform.render import jinja as render_jinja

SEEDS = fz.seeds()
EXAMPLES = int(os.environ.get("FLEETFORM_FUZZ_EXAMPLES", "40"))
KUBE_EVERY = 15  # kubernetes-validate on every 15th accepted case (about 10 ms an object)


def _leaf(slot: fz.Slot) -> bool:
    types = fz._types(slot.sub)
    if types == ["object"]:
        return False
    items = slot.sub.get("items")
    return not (types == ["array"] and isinstance(items, dict) and
                fz._types(fz._deref(items, schema_module.schema().get("$defs", {}))) == ["object"])


def test_every_field_is_reached():
    cases = fz.sweep_cases(SEEDS)
    reached = {c[1].path for c in cases}
    missed = [str(s) for s in fz.slots() if _leaf(s) and s.path not in reached]
    assert not missed, f"schema fields no sweep case sets (add a seed or a FORMS value that fits): {missed}"
    assert len(fz.slots()) > 150  # the walk found the schema's fields, not a few of them


def _kube_validate(read: dict, version: str = "1.31") -> None:
    import kubernetes_validate

    for name, docs in read.items():
        if "/k8s/" not in name or name.endswith("kustomization.yaml"):
            continue
        for doc in docs:
            if isinstance(doc, dict) and doc.get("apiVersion", "").count("/") <= 1 and \
                    doc.get("apiVersion", "").split("/")[0] in ("v1", "apps", "policy", "autoscaling", "networking.k8s.io",
                                                                "scheduling.k8s.io"):
                if doc.get("kind") == "ConfigMap":  # a YAML file in it is read as YAML (fuzz_oracles.read_files)
                    doc = {**doc, "data": {k: v if isinstance(v, str) else "" for k, v in (doc.get("data") or {}).items()}}
                try:
                    kubernetes_validate.validate(doc, f"{version}.0", strict=True)
                except kubernetes_validate.ValidationError as err:
                    raise AssertionError(f"{name}: kubernetes-validate: {err}") from None


def run_case(case, folder: Path, stats: Counter) -> None:
    """One sweep case through the oracle, with its twin where the value is a string."""
    name, slot, location, value, key = case
    data = copy.deepcopy(SEEDS[name])
    path = fz.place(data, location, value, key)
    label = f"{name}: {slot} = {value!r}" + (f" (key {key!r})" if key else "")
    try:
        outcome = fz.check(data, folder / "mutant", [value] if isinstance(value, str) else [])
        stats["accepted" if outcome.accepted else "refused"] += 1
        if not outcome.accepted:
            return
        if stats["accepted"] % KUBE_EVERY == 1:
            _kube_validate(outcome.read)
            stats["kubernetes-validate"] += 1
        inert = fz.inert_for(slot) if isinstance(value, str) and value else None
        if inert and inert != value and path:
            twin = copy.deepcopy(SEEDS[name])
            fz.place(twin, location, inert, key)
            compared = fz.twin_check(data, twin, outcome.read, folder / "twin", inert, value)
            stats["strings compared"] += compared
    except (AssertionError, ValueError, yaml.YAMLError) as err:  # a consumer's parser refusing a file (json, YAML)
        raise AssertionError(f"{label}:\n{type(err).__name__}: {err}") from None


def _sweep(tmp_path: Path, stop_at_first: bool = False) -> tuple[Counter, int | None, str]:
    stats: Counter = Counter()
    fz._TWINS.clear()  # twins rendered by other code (another injection) do not count
    for index, case in enumerate(fz.sweep_cases(SEEDS)):
        try:
            run_case(case, tmp_path / f"case{index}", stats)
        except AssertionError as err:
            if stop_at_first:
                return stats, index + 1, str(err)
            raise
        stats["cases"] += 1
    return stats, None, ""


def test_sweep(tmp_path):
    start, cpu = time.monotonic(), time.process_time()
    stats, _, _ = _sweep(tmp_path)
    print(dict(stats), f"{time.monotonic() - start:.1f} s ({time.process_time() - cpu:.1f} s CPU)")
    assert stats["accepted"] >= 150 and stats["refused"] >= 50, stats
    assert stats["strings compared"] >= 500 and stats["kubernetes-validate"] >= 5, stats


SLURM_SLOTS = ("partitions", "switches", "cluster_name", "hosts", "controller")


def test_slurmctld_reads_hostile_slurm_values(tmp_path):
    """The real slurmctld (tests/slurmctld.py, about a second each) on a sample: the first three
    accepted sweep cases whose hostile value lands in a Slurm file's field."""
    from conftest import require

    require("slurmctld", "slurmctld")
    import slurmctld

    ran = 0
    for index, (name, slot, location, value, key) in enumerate(fz.sweep_cases(SEEDS)):
        if not any(part in SLURM_SLOTS for part in slot.path) or not isinstance(value, str):
            continue
        data = copy.deepcopy(SEEDS[name])
        fz.place(data, location, value, key)
        outcome = fz.check(data, tmp_path / f"case{index}")
        if not outcome.accepted:
            continue
        for path, content in outcome.files.items():
            if "/slurm/" in path and "/bin/" not in path:
                target = tmp_path / f"case{index}" / "out" / path
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(content)
        for folder in sorted((tmp_path / f"case{index}" / "out").glob("*/slurm")):
            result = slurmctld.check(folder)
            assert result.ok, f"{name}: {slot} = {value!r}: slurmctld: {slurmctld.problems(result) or result.output[-2000:]}"
            ran += 1
        if ran >= 3:
            break
    assert ran >= 3


def test_user_data_with_every_hostile_string_is_shellcheck_clean(tmp_path):
    """shellcheck on a sample: the user data of a training fleet carrying every hostile string the
    schema admits in some field, each as one cluster.env value; bash reads each back unchanged."""
    import subprocess

    from conftest import require

    strings = [h for h in fz.HOSTILE if plaintext.problem(h) is None]
    outcome = fz.check(copy.deepcopy(SEEDS["onprem-ib.yaml"]), tmp_path / "case", strings)
    assert outcome.accepted
    texts, _ = fz.user_data(pipeline_model(tmp_path / "case" / "blueprint.yaml"), strings)
    done = subprocess.run([require("shellcheck", "shellcheck"), "--shell=bash", "-"], input=texts[0],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout


def pipeline_model(path: Path):
    from fleetform import pipeline

    return pipeline.check(path).model


# --- hypothesis: several slots at once --------------------------------------------------------------

LEAVES = [s for s in fz.slots() if _leaf(s)]


def _values(slot: fz.Slot):
    pool = fz.candidates(slot.sub)
    strategies = [st.sampled_from(pool)] if pool else []
    pattern = slot.sub.get("pattern")
    if pattern and "string" in fz._types(slot.sub):
        validator = fz._validator(slot.sub)
        strategies.append(st.from_regex(pattern, fullmatch=True).filter(lambda v: fz._fits(validator, v)))
    return st.one_of(strategies) if strategies else st.nothing()


def _keys(slot: fz.Slot):
    pool = fz.key_candidates(slot)
    pattern = slot.sub.get("x-key", {}).get("pattern")
    options = [st.sampled_from(pool)] if pool else []
    if pattern:
        validator = fz._validator({"type": "string", "pattern": pattern})
        options.append(st.from_regex(pattern, fullmatch=True).filter(lambda v: fz._fits(validator, v) and len(v) < 64))
    return st.one_of(options)


@st.composite
def examples(draw):
    name = draw(st.sampled_from(sorted(SEEDS)))
    data = copy.deepcopy(SEEDS[name])
    last = None
    for _ in range(draw(st.integers(1, 3))):
        slot = draw(st.sampled_from(LEAVES))
        found = fz.locations(data, slot, create=draw(st.booleans()))
        if not found:
            continue
        location = draw(st.sampled_from(found))
        value = draw(_values(slot))
        key = draw(_keys(slot)) if slot.path[-1] == "{}" else None
        try:
            fz.place(data, location, value, key)
        except (KeyError, IndexError, TypeError):
            continue  # a location a previous placement moved
        last = (slot, location, value, key) if isinstance(value, str) else last
    return name, data, last


def test_property(tmp_path_factory):
    stats: Counter = Counter()
    root = tmp_path_factory.mktemp("fuzz-property")

    @settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None, print_blob=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
    @given(examples())
    def one(example):
        name, data, last = example
        stats["examples"] += 1
        folder = root / f"e{stats['examples']}"
        strings = [last[2]] if last else []
        outcome = fz.check(data, folder / "mutant", strings)
        stats["accepted" if outcome.accepted else "refused"] += 1
        if outcome.accepted and last:
            slot, location, value, key = last
            inert = fz.inert_for(slot)
            if inert and value and inert != value and inert not in str(data):
                twin = copy.deepcopy(data)
                try:
                    fz.place(twin, location, inert, key)
                except (KeyError, IndexError, TypeError):
                    return
                if fz._at(twin, location, key) == inert:
                    stats["strings compared"] += fz.twin_check(data, twin, outcome.read, folder / "twin", inert, value)

    one()
    print(dict(stats))
    assert stats["examples"] == EXAMPLES and stats["accepted"] >= EXAMPLES // 5, stats


# --- the fuzzer's strength: regressions injected one at a time --------------------------------------


def _template_patch(monkeypatch, template: str, old: str, new: str) -> None:
    """Serve a changed copy of one template from fleetform's one Jinja environment."""
    source = (Path(render_jinja._templates()) / template).read_text(encoding="utf-8")
    assert old in source, f"{template} no longer holds {old!r}: update the injection"
    env = render_jinja.environment()
    patched = env.overlay(loader=jinja2.ChoiceLoader([jinja2.DictLoader({template: source.replace(old, new)}),
                                                      env.loader]))
    monkeypatch.setattr(render_jinja, "environment", lambda: patched)


def _schema_patch(monkeypatch, where: tuple, pattern: str) -> None:
    """Loosen one pattern of the live schema (and the validator built from it)."""
    loosened = copy.deepcopy(schema_module.schema())
    node = loosened
    for part in where:
        node = node[part]
    node["pattern"] = pattern
    monkeypatch.setattr(schema_module, "schema", lambda: loosened)
    validator = schema_module._Validator(loosened)
    monkeypatch.setattr(schema_module, "_validator", lambda: validator)


INJECTIONS = {
    # (a) a name printed unquoted in a manifest: a model named `yes` is a boolean to kubectl
    "k8s-name-unquoted": lambda mp: _template_patch(mp, "k8s/service.yaml.j2", "name: {{ s.name | q }}",
                                                    "name: {{ s.name }}"),
    # (a') a label value printed unquoted
    "k8s-label-unquoted": lambda mp: _template_patch(mp, "k8s/namespace.yaml.j2", "{{ key | q }}: {{ value | q }}",
                                                     "{{ key | q }}: {{ value }}"),
    # (b) template delimiters let through: both the schema stage and the render guard ask plaintext
    "delimiters-let-through": lambda mp: mp.setattr(plaintext, "_DELIMITER", re.compile(r"(?!)")),
    # (c) a missing shell quote in the user data's cluster.env
    "user-data-unquoted": lambda mp: _template_patch(mp, "cloud-init/user-data.sh.j2", "{{ key }}={{ value | sh }}",
                                                     '{{ key }}="{{ value }}"'),
    # (d) an env value unquoted in nccl.env
    "nccl-env-unquoted": lambda mp: _template_patch(mp, "nccl/nccl.env.j2", "{{ v.name }}={{ v.value | sh }}",
                                                    "{{ v.name }}={{ v.value }}"),
    # (e) a slurm.conf value with a space, unquoted: the partition name's pattern lets a space through
    "slurm-space": lambda mp: _schema_patch(mp, ("$defs", "partition", "properties", "name"), "^[a-z][a-z0-9_ -]*$"),
    # (f) a schema pattern loosened: DNS labels with a space or `#` reach Slurm's files and label values
    # (capitals and `_` alone are no test of the fuzzer: the k8s-names rule refuses them first)
    "dns-label-loosened": lambda mp: _schema_patch(mp, ("$defs", "dnsLabel"), "^[a-z]([-a-z0-9 #]*[a-z0-9])?$"),
    # (f') the line-break check dropped: Python's `$` lets `name\n` through every anchored pattern
    "line-breaks-let-through": lambda mp: mp.setattr(plaintext, "_BAD_CHARS", frozenset("\x00")),
    # (g) a string printed unquoted in bin/fleet.json
    "fleet-json-unquoted": lambda mp: _template_patch(mp, "slurm/fleet.json.j2", '"blueprint": {{ blueprint | q }}',
                                                      '"blueprint": {{ blueprint }}'),
    # (h) a selector value unquoted: a label value `012` is a number to kubectl
    "k8s-selector-unquoted": lambda mp: _template_patch(mp, "k8s/deployment.yaml.j2",
                                                        "      {{ key | q }}: {{ value | q }}\n{% endfor %}\n  strategy:",
                                                        "      {{ key | q }}: {{ value }}\n{% endfor %}\n  strategy:"),
}


@pytest.mark.parametrize("injection", sorted(INJECTIONS))
def test_a_regression_fails_the_sweep(injection, tmp_path, monkeypatch):
    INJECTIONS[injection](monkeypatch)
    start, cpu = time.monotonic(), time.process_time()
    stats, failed_at, why = _sweep(tmp_path, stop_at_first=True)
    print(f"{injection}: failed at sweep case {failed_at} after {time.monotonic() - start:.1f} s "
          f"({time.process_time() - cpu:.1f} s CPU): {why[:300]}")
    assert failed_at is not None, f"the sweep passed with {injection} injected: {dict(stats)}"
