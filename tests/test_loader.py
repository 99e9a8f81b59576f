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


def test_a_tagged_bool_or_null_with_a_line_break_is_refused():
    """The core schema's patterns were regular expressions whose `$` also matched before a final line
    break: `!!bool "true\\n"` loaded as false and `!!null "null\\n"` as nothing."""
    assert findings_of(HEAD + 'a: !!bool "true\\n"\n') == [("yaml", 3, 4, "")]
    assert findings_of(HEAD + 'a: !!null "null\\n"\n') == [("yaml", 3, 4, "")]
    doc = parse((HEAD + 'a: !!bool "true"\nb: !!null "~"\nc: !!bool FALSE\n').encode(), "t.yaml")
    assert (doc.data["a"], doc.data["b"], doc.data["c"]) == (True, None, False)


def test_not_utf8_points_at_the_byte():
    assert findings_of(HEAD.encode() + b"a: caf\xe9\n") == [("yaml-encoding", 3, 7, "")]


def test_utf8_bom_is_accepted():
    assert parse(b"\xef\xbb\xbf" + HEAD.encode(), "t.yaml").data["kind"] == "Blueprint"


def test_not_utf8_after_a_bom_points_at_the_byte():
    """The BOM's three bytes once shifted the report: 3:4, byte 0x63 ('c') at offset 47 was reported."""
    with pytest.raises(LoadError) as err:
        parse(b"\xef\xbb\xbf" + HEAD.encode() + b"a: caf\xe9\n", "t.yaml")
    (finding,) = err.value.findings
    assert (finding.line, finding.column) == (3, 7)
    assert finding.message == "the file is not UTF-8 text (byte 0xe9 at offset 50)"
    with pytest.raises(LoadError) as err:
        parse(b"\xef\xbb\xbfa: caf\xe9\n", "t.yaml")
    assert (err.value.findings[0].line, err.value.findings[0].column) == (1, 7)


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


# --- odd inputs (issue 9, defect 10) ---------------------------------------------------------------


def _cli(*args, timeout=30):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "fleetform", *args], capture_output=True, text=True, timeout=timeout)


def test_a_fifo_is_refused_at_once_not_read(tmp_path):
    """A named pipe with no writer used to block `validate` forever."""
    import os

    fifo = tmp_path / "bp.yaml"
    os.mkfifo(fifo)
    for command in ("validate", "render", "plan"):
        result = _cli(command, str(fifo))  # the timeout fails the test if it blocks
        assert result.returncode == 2, result
        assert result.stderr == f"fleetform: error: cannot read {fifo}: it is a named pipe (FIFO), not a regular " \
                                "file; a blueprint is a YAML file\n"
        assert result.stdout == ""


@pytest.mark.parametrize("path, kind", [("/dev/zero", "a character device"), ("/dev/null", "a character device"),
                                        ("/", "a folder")])
def test_devices_and_folders_are_refused_before_reading(path, kind):
    """/dev/zero used to be read up to the size limit and reported as "0 bytes, more than 4,194,304"."""
    from fleetform.loader import NotAFile

    with pytest.raises(NotAFile) as err:
        load(path)
    assert err.value.strerror == f"it is {kind}, not a regular file; a blueprint is a YAML file"
    result = _cli("validate", path)
    assert result.returncode == 2 and f"cannot read {path}: it is {kind}" in result.stderr


def test_the_size_finding_states_the_measured_size(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_bytes(HEAD.encode() + b"x: " + b"a" * MAX_BYTES + b"\n")
    with pytest.raises(LoadError) as err:
        load(path)
    size = path.stat().st_size
    assert err.value.findings[0].message == f"the file is {size:,} bytes, more than the 4,194,304 bytes a " \
                                            "blueprint may have"


def test_a_long_plain_list_is_not_blamed_on_aliases():
    """A million written-out items used to be reported as "aliases expand too far (a YAML bomb?)"."""
    with pytest.raises(LoadError) as err:
        parse((HEAD + "x:\n" + "- 1\n" * 1_000_000).encode(), "t.yaml")
    (finding,) = err.value.findings
    assert finding.message == ("the document holds more than 200,000 values (200,001 written out and 0 repeated "
                               "by aliases, by line 200000)")
    assert "alias" not in finding.hint and "split the fleets" in finding.hint


def test_an_alias_bomb_says_how_much_the_aliases_repeated():
    lines = [HEAD.rstrip("\n"), 'a0: &a0 ["lol"]']
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    with pytest.raises(LoadError) as err:
        parse(("\n".join(lines) + "\n").encode(), "t.yaml")
    (finding,) = err.value.findings
    assert finding.message.startswith("aliases expand the document to more than 200,000 values (10 written out and ")
    assert "YAML bomb" in finding.hint


def test_a_number_too_long_for_python_is_a_finding():
    """Python refuses int() of more than 4,300 digits; that was a ValueError and exit 3."""
    found = findings_of(HEAD + "x: " + "9" * 5000 + "\n")
    assert found == [("yaml", 3, 4, "")]


def test_diff_refuses_what_is_not_a_file_like_validate(tmp_path):
    import os

    from conftest import ROOT

    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    for old in (str(fifo), "/dev/zero", str(tmp_path / "missing.yaml")):
        result = _cli("diff", old, str(ROOT / "blueprints/reference.yaml"))
        assert result.returncode == 2 and result.stderr.startswith(f"fleetform: error: cannot read {old}: "), result
