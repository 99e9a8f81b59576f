"""Property-based fuzzing of the whole pipeline (issue 9, "What to build"): mutants of the shipped
blueprints, and what must hold for every one of them.

Each example takes a shipped blueprint (blueprints/*.yaml), applies one to three mutations to its
data (a value of another type, a number at or past a bound, another enum value, a name with YAML,
Jinja or shell metacharacters or unicode, a duplicated or renamed item, a dropped or unknown key)
and sometimes one to its YAML text (a tab, a duplicated or dropped line, an alias); a third of
the examples set exactly one string to a YAML 1.1 look-alike (`on`, `null`, `4711`, `1:30`...), for
the round trip below. Each mutant runs in-process through fleetform.cli.main:

- validate exits 0 or 1, never 3; nothing reaches stderr; every line it prints is a compiler-style
  finding (FILE:LINE:COLUMN: SEVERITY: ... [RULE]) and the last one is the summary;
- a rejected mutant renders nothing (exit 1, no output folder);
- an accepted mutant renders (exit 0), and rendering it again gives the same bytes; every tenth
  accepted mutant also plans (exit 0 or 1 under Pulumi's mocks, which are slow);
- in every rendered YAML file each string means the same to a YAML 1.1 reader (kubectl's; PyYAML's
  safe_load is YAML 1.1) as to a YAML 1.2 one, and a string the mutant put in the blueprint reads
  back as that string wherever it lands: the mutant is rendered beside a twin holding an inert word
  instead, and every string of the twin's files that holds the word must read back, with the
  mutant's string in its place, from the mutant's files.

The example budget is fixed and derandomized (the same mutants on every run), so CI time stays
bounded: about 40 s on a 2-core machine (180 examples, of which about 37 are accepted and 4 planned).
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import re
from collections import Counter
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import EXAMPLES
from fuzz_oracles import Yaml12, typed
from fleetform import cli
from fleetform.loader import load
from fleetform.schema import schema

EXAMPLES_BUDGET = 180
PLAN_EVERY = 10  # plan every tenth accepted mutant: the program under mocks takes about a second

FINDING = re.compile(r"^(?P<file>[^:\n]+):(?P<line>[1-9][0-9]*):(?P<column>[1-9][0-9]*): (?P<severity>error|warning): "
                     r".+ \[(?P<rule>[a-z0-9-]+)\]$")
SUMMARY = re.compile(r"^[0-9]+ blueprints? (valid: no errors|checked, (in)?valid: [0-9]+ errors?, [0-9]+ warnings?)")

SEEDS = {path.name: load(path).data for path in EXAMPLES}

INERT = "zqvzq"
"""The twin's word: lower-case letters, valid wherever a name, label or text is, and in no blueprint."""

YAML_11_AMBIGUOUS = ["yes", "no", "on", "off", "y", "n", "Yes", "NO", "On", "OFF", "true", "false", "True", "FALSE",
                     "null", "Null", "NULL", "nan", "inf", "1e3", "0x1f", "0o17", "4711", "1_000", "012",
                     "2024-01-01", "1.5", "1:30"]
"""Plain scalars that a YAML 1.1 reader takes for a boolean, null, number or date; most of them are
valid DNS labels, label values or Hugging Face ids, so they reach the rendered files."""

METACHARACTERS = ["{{ 7*7 }}", "{% if %}", "{# x #}", "$(reboot)", "`id`", "a;b", "a|b", "a&&b", "'", '"', "a'b",
                  "*alias", "&anchor", "!tag", "#comment", "a: b", "- a", "[a]", "{a: b}", "%TAG", "@x", "a\\b",
                  "a b", " a", "a ", "", "a\tb", "-", "--", "---", "...", "?", ">", "|", "=", "x=y", "a,b", "a/b/c"]

UNICODE = ["ñandú", "日本語", "模型", "Ω", "naïve", "a\u200bb", "\u202eabc", "a\u2028b", "a\x85b", "e\u0301", "ﬁ",
           "😀", "ａ", "İ", "\ufeffa"]

BOUNDARY_NUMBERS = [0, -1, 1, 2, 3, 7, 8, 16, 17, 48, 63, 64, 255, 256, 1023, 1024, 1200, 2400, 65535, 65536, 65537,
                    100000, 10 ** 30, -(10 ** 30), 0.5, 1.5, 0.001, 1e-300, 1e308, float("inf"), float("nan"), 2 ** 63]

OTHER_TYPES = [None, True, False, [], {}, ["a"], {"a": 1}, "6", "1.0.0", 6.0]


def _enum_values() -> list:
    found: list = []

    def walk(node):
        if isinstance(node, dict):
            found.extend(v for v in node.get("enum", []) if v not in found)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema())
    return found


ENUMS = _enum_values()


def _paths(data, path=()):
    """Every (path, value) of the data, containers included."""
    yield path, data
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _paths(value, path + (key,))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from _paths(value, path + (index,))


def _parent(data, path):
    for part in path[:-1]:
        data = data[part]
    return data


# --- mutations ----------------------------------------------------------------------------------


@st.composite
def mutants(draw):
    """(seed name, mutant text, and (the string the mutant set, the twin's text with INERT in its place)
    or None when the mutant has no such twin)."""
    name = draw(st.sampled_from(sorted(SEEDS)))
    data = copy.deepcopy(SEEDS[name])
    twin = None
    round_trip = draw(st.integers(0, 2)) == 0  # a third: one YAML 1.1 look-alike string, for the round trip
    for _ in range(1 if round_trip else draw(st.sampled_from([1, 1, 1, 2, 3]))):
        kind = "string" if round_trip else draw(st.sampled_from(["string"] * 8 + [
            "number", "number", "type", "enum", "drop", "unknown", "duplicate", "rename-key", "same-name"]))
        fits = {
            "string": lambda p, v: isinstance(v, str),
            "number": lambda p, v: isinstance(v, (int, float)) and not isinstance(v, bool),
            "enum": lambda p, v: isinstance(v, str) or isinstance(v, (int, float)),
            "unknown": lambda p, v: isinstance(v, dict),
            "duplicate": lambda p, v: isinstance(v, list) and bool(v),
            "rename-key": lambda p, v: len(p) > 1 and p[-2] in ("labels", "env"),
            "same-name": lambda p, v: p[-1] == "name" and isinstance(v, str),
        }.get(kind, lambda p, v: True)
        paths = [p for p, v in _paths(data) if p and p[0] not in ("apiVersion", "kind") and fits(p, v)]
        if not paths:
            continue
        path = draw(st.sampled_from(paths))
        parent, key = _parent(data, path), path[-1]
        value = parent[key]
        if kind == "string":
            new = draw(st.sampled_from(YAML_11_AMBIGUOUS) if round_trip else st.sampled_from(YAML_11_AMBIGUOUS) |
                       st.sampled_from(METACHARACTERS + UNICODE))
            if draw(st.booleans()) and new:
                new = draw(st.sampled_from([f"{value}{new}", f"{new}-{value}", new]))
            parent[key] = new
            twin = (path, new)
        elif kind == "number":
            parent[key] = draw(st.sampled_from(BOUNDARY_NUMBERS + [value + 1, value - 1, value * 1000]))
        elif kind == "type":
            parent[key] = copy.deepcopy(draw(st.sampled_from(OTHER_TYPES)))
        elif kind == "enum":
            parent[key] = draw(st.sampled_from(ENUMS))
        elif kind == "drop" and isinstance(parent, dict):
            del parent[key]
        elif kind == "unknown":
            value[draw(st.sampled_from(["extra", "nmae", "on", "yes", "{{x}}", "ñ"]))] = draw(st.sampled_from(OTHER_TYPES))
        elif kind == "duplicate":
            value.append(copy.deepcopy(draw(st.sampled_from(value))))
        elif kind == "rename-key":
            new = draw(st.sampled_from(YAML_11_AMBIGUOUS + METACHARACTERS[:12] + UNICODE[:4]))
            parent[new] = parent.pop(key)
            twin = (path[:-1] + (new,), new)
        elif kind == "same-name":  # one item takes another's name
            other = draw(st.sampled_from(paths))
            parent["name"] = _parent(data, other)["name"]
        if twin is not None and twin[0] != path and twin[0] != path[:-1] + (twin[1],):
            twin = None  # a later mutation changed another place: keep the twin simple, only the last string
    text = _dump(data)
    twin_text = None
    if twin is not None and twin[1] and INERT not in twin[1] and _holds(data, *twin):
        twin_text = _with_string(data, twin[0], twin[1])
        if _reads_back(text) != data:  # the mutant must hold the string meant, or the twin proves nothing
            twin_text = None
    if not round_trip and draw(st.integers(0, 6)) == 0:
        text = _text_mutation(text, draw)
        twin_text = None
    return name, text, (twin[1], twin_text) if twin_text else None


def _holds(data, path, new) -> bool:
    """Whether the string (or key) new is still where the mutation put it."""
    try:
        parent = _parent(data, path)
        value = parent[path[-1]]
    except (KeyError, IndexError, TypeError):
        return False
    return isinstance(value, str) and new in value or (isinstance(parent, dict) and path[-1] == new)


def _with_string(data, path, new):
    """The mutant's text with INERT where the mutant's string was (a key or a value)."""
    twin = copy.deepcopy(data)
    parent = _parent(twin, path)
    if path[-1] == new and isinstance(parent, dict) and new in parent and len(path) > 1 and path[-2] in ("labels", "env"):
        rebuilt = {(INERT if k == new else k): v for k, v in parent.items()}
        parent.clear()
        parent.update(rebuilt)
    else:
        parent[path[-1]] = parent[path[-1]].replace(new, INERT)
    return _dump(twin)


class _Dumper(yaml.SafeDumper):
    """PyYAML writes YAML 1.1; fleetform reads 1.2: quote every string a 1.2 reader would take for
    another scalar (`1e3`, `0o17`), as PyYAML already quotes those 1.1 would (`yes`, `012`)."""


def _represent_str(dumper, value: str):
    try:
        other = _plain_word(value) and not isinstance(yaml.load(value, Loader=_Yaml12), str)
    except yaml.YAMLError:  # `...`, `---`: not a scalar at all when plain
        other = True
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="'" if other else None)


_Dumper.add_representer(str, _represent_str)


def _plain_word(value: str) -> bool:
    return bool(re.fullmatch(r"[-+.0-9A-Za-z_~]*", value))


def _dump(data) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=10_000)


def _reads_back(text: str):
    from fleetform.loader import LoadError, parse

    try:
        return parse(text.encode("utf-8"), "mutant.yaml").data
    except LoadError:
        return None


def _text_mutation(text, draw):
    lines = text.split("\n")
    index = draw(st.integers(0, max(0, len(lines) - 2)))
    kind = draw(st.sampled_from(["tab", "duplicate-line", "drop-line", "alias", "truncate"]))
    if kind == "tab":
        lines[index] = "\t" + lines[index]
    elif kind == "duplicate-line":
        lines.insert(index, lines[index])
    elif kind == "drop-line":
        del lines[index]
    elif kind == "alias":
        lines[index] = lines[index].replace(": ", ": &a ", 1)
        lines.insert(min(len(lines) - 1, index + 1), lines[index].split(":")[0] + "x: *a")
    else:
        lines = lines[:index]
    return "\n".join(lines) + "\n"


# --- running fleetform --------------------------------------------------------------------------


def _run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(args))
    return code, out.getvalue(), err.getvalue()


def _assert_findings(stdout: str, label: str) -> None:
    lines = stdout.split("\n")
    assert lines[-1] == "", f"{label}: output does not end with a line break"
    *findings, summary = lines[:-1]
    assert SUMMARY.match(summary), f"{label}: last line is not the summary: {summary!r}"
    for line in findings:
        if line.startswith("... and ") and "more finding" in line:
            continue
        assert FINDING.match(line), f"{label}: not a compiler-style finding: {line!r}"


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


# --- YAML readers -------------------------------------------------------------------------------


# the YAML 1.2 core schema's reader and the typed view of a value: tests/fuzz_oracles.py, shared with the
# schema sweep
_Yaml12, _typed = Yaml12, typed


def _leaves(value, path=()):
    """(path of keys, with list positions left out, and the leaf) of every scalar: order-free."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, path + (_typed(key),))
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item, path)
    else:
        yield path, _typed(value)


def _swap(item, old: str, new: str):
    if isinstance(item, tuple) and len(item) == 2 and item[0] == "str":
        return ("str", item[1].replace(old, new))
    if isinstance(item, tuple):
        return tuple(_swap(x, old, new) for x in item)
    return item


def _check_yaml(files: dict[str, bytes], label: str) -> dict[str, list]:
    """Each YAML file reads the same under YAML 1.1 and 1.2; returns the 1.1 reading of each."""
    read = {}
    for name, data in files.items():
        if not name.endswith((".yaml", ".yml")):
            continue
        text = data.decode("utf-8")
        as_11 = list(yaml.safe_load_all(text))
        as_12 = list(yaml.load_all(text, Loader=_Yaml12))
        assert _typed(as_11) == _typed(as_12), f"{label}: {name} reads differently as YAML 1.1 and 1.2"
        read[name] = as_11
    return read


def _check_round_trip(mutant: dict[str, list], twin: dict[str, list], value: str, label: str) -> int:
    """Every string of the twin's YAML files that holds INERT reads back from the mutant's files with
    the mutant's string in its place, as a string. Returns how many strings were compared."""
    compared = 0
    for name, documents in twin.items():
        target = name.replace(INERT, value)
        assert target in mutant, f"{label}: the twin's {name} has no counterpart {target}"
        theirs = Counter(_leaves(mutant[target]))
        for path, leaf in _leaves(documents):
            if INERT not in repr((path, leaf)):
                continue
            expected = (_swap(path, INERT, value), _swap(leaf, INERT, value))
            assert theirs[expected] > 0, f"{label}: {name}: {expected} does not read back from {target}"
            compared += 1
    return compared


# --- the test -----------------------------------------------------------------------------------


def test_mutants_of_the_shipped_blueprints(tmp_path_factory, monkeypatch):
    monkeypatch.delenv("FLEETFORM_DEBUG", raising=False)
    stats: Counter = Counter()
    root = tmp_path_factory.mktemp("fuzz")

    @settings(max_examples=EXAMPLES_BUDGET, derandomize=True, deadline=None, database=None, print_blob=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(mutants())
    def one(example):
        name, text, twin = example
        stats["examples"] += 1
        case = root / f"case{stats['examples']}"
        case.mkdir()
        source = case / name
        source.write_text(text, encoding="utf-8")
        label = f"mutant of {name}:\n{text}"

        code, out, err = _run("validate", str(source))
        assert code in (0, 1), f"{label}\nvalidate exit {code}: {err}"
        assert err == "", f"{label}\nvalidate wrote to stderr: {err}"
        _assert_findings(out, label)
        if code == 1:
            stats["rejected"] += 1
            code, out, err = _run("render", str(source), "-o", str(case / "out"))
            assert (code, err) == (1, ""), f"{label}\nrender of a rejected mutant: exit {code} {err}"
            assert not (case / "out").exists(), f"{label}\nrender wrote files for a rejected mutant"
            return

        stats["accepted"] += 1
        code, out, err = _run("render", str(source), "-o", str(case / "out"))
        assert (code, err) == (0, ""), f"{label}\nrender of an accepted mutant: exit {code}\n{out}{err}"
        code, out, err = _run("render", str(source), "-o", str(case / "again"))
        assert code == 0, f"{label}\nsecond render: exit {code}\n{out}{err}"
        files = _tree(case / "out")
        assert files == _tree(case / "again"), f"{label}\nrendering twice gave different bytes"
        read = _check_yaml(files, label)
        stats["yaml files"] += len(read)

        if stats["accepted"] % PLAN_EVERY == 1:
            code, out, err = _run("plan", str(source), "--format", "json")
            assert code in (0, 1) and err == "", f"{label}\nplan: exit {code}\n{err}"
            plan = json.loads(out)
            assert plan["resources"] or plan["blueprint"], label
            stats["planned"] += 1

        if twin is not None:
            value, twin_text = twin
            twin_source = case / "twin" / name
            twin_source.parent.mkdir()
            twin_source.write_text(twin_text, encoding="utf-8")
            if _run("render", str(twin_source), "-o", str(case / "twin-out"))[0] != 0:
                return  # the inert word is not valid where the mutant's string was (an image, a CIDR...)
            twin_read = _check_yaml(_tree(case / "twin-out"), label)
            compared = _check_round_trip(read, twin_read, value, f"{label}\n(string {value!r})")
            stats["round trips"] += 1 if compared else 0
            stats["strings compared"] += compared

    one()
    print(dict(stats))
    # The budget reached every part of the property, not only the rejections.
    assert stats["examples"] == EXAMPLES_BUDGET
    assert stats["accepted"] >= 25 and stats["rejected"] >= 60, stats
    assert stats["planned"] >= 3 and stats["round trips"] >= 8 and stats["yaml files"] >= 30, stats


@pytest.mark.parametrize("value", ["yes", "on", "null", "true", "4711", "1:30", "2024-01-01"])
def test_the_yaml_12_reader_of_this_test_tells_strings_from_other_scalars(value):
    """A negative control of the YAML property: the 1.1 and 1.2 readings differ where they must."""
    as_11 = yaml.safe_load(f"a: {value}\n")["a"]
    as_12 = yaml.load(f"a: {value}\n", Loader=_Yaml12)["a"]
    quoted = yaml.load(f"a: {json.dumps(value)}\n", Loader=_Yaml12)["a"]
    assert quoted == value and yaml.safe_load(f"a: {json.dumps(value)}\n")["a"] == value
    if value in ("yes", "on", "1:30", "2024-01-01"):
        assert _typed(as_11) != _typed(as_12)
    else:
        assert _typed(as_11) == _typed(as_12)  # the twin comparison catches these: the type is not str


def test_the_round_trip_catches_a_string_that_became_a_boolean():
    twin = {"a.yaml": [{"metadata": {"name": INERT, "labels": {"app": f"{INERT}-svc"}}}]}
    good = {"a.yaml": [{"metadata": {"name": "on", "labels": {"app": "on-svc"}}}]}
    bad = {"a.yaml": [{"metadata": {"name": True, "labels": {"app": "on-svc"}}}]}
    assert _check_round_trip(good, twin, "on", "good") == 2
    with pytest.raises(AssertionError, match="does not read back"):
        _check_round_trip(bad, twin, "on", "bad")
