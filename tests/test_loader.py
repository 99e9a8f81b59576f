"""The loader: positions, YAML 1.2 scalars, and the bounds that keep hostile files harmless."""

from __future__ import annotations

import pytest

from fleetform.loader import MAX_BYTES, LoadError, load, parse


def findings_of(text: str | bytes):
    with pytest.raises(LoadError) as err:
        parse(text if isinstance(text, bytes) else text.encode(), "t.yaml")
    return [(f.rule, f.line, f.column, f.path) for f in err.value.findings]


HEAD = "apiVersion: fleetform/v1\nkind: Blueprint\n"


def test_positions_of_values_and_keys():
    doc = parse((HEAD + "fleets:\n  - name: train\n    nodes: {min: 1, max: 4}\n").encode(), "t.yaml")
    assert doc.locate(("fleets", 0, "name")) == ("t.yaml", 4, 11)
    assert doc.locate(("fleets", 0, "name"), key=True) == ("t.yaml", 4, 5)
    assert doc.locate(("fleets", 0, "nodes", "max")) == ("t.yaml", 5, 26)
    # a path that was not written falls back to its nearest written ancestor
    assert doc.locate(("fleets", 0, "placement")) == ("t.yaml", 4, 5)


def test_yaml_12_core_scalars_stay_text():
    doc = parse((HEAD + "a: 1:00:00\nb: on\nc: yes\nd: 2024-01-01\ne: 0x1f\nf: 1.5\ng: ~\nh: .inf\ni: 'true'\nj: True\n")
                .encode(), "t.yaml")
    d = doc.data
    assert (d["a"], d["b"], d["c"], d["d"]) == ("1:00:00", "on", "yes", "2024-01-01")
    assert (d["e"], d["f"], d["g"], d["h"], d["i"], d["j"]) == (31, 1.5, None, float("inf"), "true", True)


def test_duplicate_keys_all_reported():
    found = findings_of(HEAD + "a: 1\na: 2\nb: {c: 1, c: 2}\n")
    assert found == [("yaml-duplicate-key", 4, 1, "a"), ("yaml-duplicate-key", 5, 11, "b.c")]


def test_merge_keys_and_aliases():
    doc = parse((HEAD + "x: &d {a: 1, b: 2}\ny: {<<: *d, b: 3}\nz: [*d]\n").encode(), "t.yaml")
    assert doc.data["y"] == {"a": 1, "b": 3}
    assert doc.data["z"] == [{"a": 1, "b": 2}]
    doc.data["z"][0]["a"] = 9  # an alias is a copy, not a shared object
    assert doc.data["x"]["a"] == 1


@pytest.mark.parametrize("text, rule, line", [
    ("", "blueprint-empty", 1),
    ("# only a comment\n", "blueprint-empty", 1),
    ("- a\n- b\n", "blueprint-type", 1),
    ("just text\n", "blueprint-type", 1),
    (HEAD + "---\nb: 2\n", "yaml-documents", 3),
    (HEAD + "a: [1, 2\n", "yaml", 4),
    (HEAD + "a: &x [*x]\n", "yaml", 3),
    (HEAD + "a: *nope\n", "yaml", 3),
    (HEAD + "a: !!python/object:os.system x\n", "yaml", 3),
    (HEAD + "? [a, b]\n: 1\n", "yaml", 3),
    ("apiVersion: fleetform/v2\nkind: Blueprint\n", "api-version", 1),
    ("apiVersion: fleetform/v1\nkind: Fleet\n", "api-version", 2),
    (HEAD + "a: \x07\n", "yaml-encoding", 3),
])
def test_bad_documents(text, rule, line):
    found = findings_of(text)
    assert [(r, l) for r, l, _, _ in found] == [(rule, line)]


def test_not_utf8_points_at_the_byte():
    assert findings_of(HEAD.encode() + b"a: caf\xe9\n") == [("yaml-encoding", 3, 7, "")]


def test_utf8_bom_is_accepted():
    assert parse(b"\xef\xbb\xbf" + HEAD.encode(), "t.yaml").data["kind"] == "Blueprint"


def test_size_limit(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_bytes(HEAD.encode() + b"x: " + b"a" * MAX_BYTES + b"\n")
    with pytest.raises(LoadError) as err:
        load(path)
    assert [f.rule for f in err.value.findings] == ["yaml-size"]


def test_deep_nesting_is_bounded():
    assert findings_of(HEAD + "a: " + "[" * 10_000 + "]" * 10_000 + "\n")[0][0] == "yaml-size"


def test_alias_bomb_is_bounded():
    lines = [HEAD.rstrip("\n"), 'a0: &a0 ["lol"]']
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    found = findings_of("\n".join(lines) + "\n")
    assert found[0][0] == "yaml-size"
