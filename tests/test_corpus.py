"""The corpus of broken blueprints: every rule has an example of the mistake it catches.

Each tests/corpus/NNN-short-name.yaml is a small, otherwise valid blueprint that breaks one thing.
It starts with a header declaring every finding fleetform must report for it, one per line:

    # expect: SEVERITY RULE PATH LINE      (PATH `-` when the finding has none)
    # expect: none                         (a file that must produce no finding at all)

Files that cannot carry a comment header (bytes that are not UTF-8, the empty file) take their
expectations from HEADERLESS below; inputs too big to commit are generated in tmp_path (GENERATED).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from conftest import ROOT, run_cli
from fleetform.loader import MAX_BYTES
from fleetform.pipeline import check
from fleetform.rules import all_rules

CORPUS = Path(__file__).resolve().parent / "corpus"
REFERENCE = ROOT / "blueprints" / "reference.yaml"

Expected = tuple[str, str, str, int]  # severity, rule, path ("" for none), line

EXPECT = re.compile(r"^# expect: (error|warning) ([a-z0-9-]+) (\S.*) ([1-9][0-9]*)$")
EXPECT_NONE = "# expect: none"

HEADERLESS: dict[str, list[Expected]] = {
    # Latin-1 bytes: the 0xe8 of "Modèles" on line 6 is not UTF-8.
    "006-encoding-latin1.yaml": [("error", "yaml-encoding", "", 6)],
    # Zero bytes.
    "014-empty-file.yaml": [("error", "blueprint-empty", "", 1)],
}


def _padded_reference(size: int) -> bytes:
    """The valid reference blueprint, padded with comment lines to exactly `size` bytes."""
    data = REFERENCE.read_bytes()
    assert data.endswith(b"\n") and len(data) < size
    line = b"#" + b"." * 78 + b"\n"
    data += line * ((size - len(data)) // len(line))
    rest = size - len(data)
    if rest:
        data += b"#" + b"." * (rest - 2) + b"\n" if rest >= 2 else b"\n"
    assert len(data) == size
    return data


GENERATED: dict[str, tuple[Callable[[], bytes], list[Expected]]] = {
    # One byte over the limit: rejected before parsing.
    "gen-over-4mib.yaml": (lambda: _padded_reference(MAX_BYTES + 1), [("error", "yaml-size", "", 1)]),
    # Exactly at the limit: a valid blueprint stays valid (the bound is not off by one), with the
    # reference's own warning (a 512-day run on a Capacity Block).
    "gen-exactly-4mib.yaml": (lambda: _padded_reference(MAX_BYTES),
                              [("warning", "capacity-duration", "fleets[0].capacity.type", 46)]),
}

@dataclass(frozen=True)
class Case:
    name: str
    expected: tuple[Expected, ...]
    make: Callable[[], bytes] | None = None  # None: the corpus file itself


def _header(path: Path) -> tuple[Expected, ...]:
    """The expectations a corpus file declares in its leading comment lines."""
    lines = path.read_bytes().decode("utf-8").splitlines()
    if not lines or not lines[0].startswith("# expect:"):
        raise ValueError(f"{path.name}: does not start with an `# expect:` line (or belongs in HEADERLESS)")
    expected: list[Expected] = []
    none = False
    for line in lines:
        if not line.startswith("#"):
            break
        if not line.startswith("# expect"):
            continue
        if line == EXPECT_NONE:
            none = True
            continue
        match = EXPECT.match(line)
        if not match:
            raise ValueError(f"{path.name}: malformed expectation {line!r}")
        severity, rule, where, number = match.groups()
        expected.append((severity, rule, "" if where == "-" else where, int(number)))
    if none == bool(expected):
        raise ValueError(f"{path.name}: declare findings, or `{EXPECT_NONE}` alone")
    return tuple(expected)


def _cases() -> list[Case]:
    cases = []
    for path in sorted(CORPUS.glob("*.yaml")):
        if path.name in HEADERLESS:
            cases.append(Case(path.name, tuple(HEADERLESS[path.name])))
        else:
            cases.append(Case(path.name, _header(path)))
    missing = set(HEADERLESS) - {c.name for c in cases}
    if missing:
        raise ValueError(f"HEADERLESS names files that are not in tests/corpus: {sorted(missing)}")
    cases += [Case(name, tuple(expected), make) for name, (make, expected) in GENERATED.items()]
    return cases


CASES = _cases()
PARAMS = [pytest.param(case, id=case.name) for case in CASES]


@pytest.fixture(scope="session")
def generated_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("generated")


def _source(case: Case, generated_dir: Path) -> Path:
    if case.make is None:
        return CORPUS / case.name
    path = generated_dir / case.name
    if not path.exists():
        path.write_bytes(case.make())
    return path


def _show(expected) -> str:
    return "\n".join(f"  {e}" for e in sorted(expected)) or "  (none)"


@pytest.mark.parametrize("case", PARAMS)
def test_findings_are_exactly_the_declared_ones(case: Case, generated_dir):
    result = check(_source(case, generated_dir), display=case.name)
    got = Counter((f.severity.value, f.rule, f.path, f.line) for f in result.findings)
    assert got == Counter(case.expected), (
        f"expected:\n{_show(case.expected)}\ngot:\n" + ("\n".join(f"  {f.to_text()}" for f in result.findings)
                                                      or "  (none)"))
    assert result.ok == (not any(severity == "error" for severity, *_ in case.expected))


FINDING_LINE = re.compile(r"^[^:]+:\d+:\d+: (error|warning): .* \[[a-z0-9-]+\]$")
FINDING_PARTS = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+):\d+: (?P<severity>error|warning): .* \[(?P<rule>[a-z0-9-]+)\]$")
SUMMARY = re.compile(r"^1 blueprint checked, (?:valid|invalid): (?P<errors>\d+) errors?, (?P<warnings>\d+) warnings?"
                     r"(?: \((?P<waived>\d+) warnings? waived\))?$")


@pytest.mark.parametrize("case", PARAMS)
def test_cli_reports_compiler_style_lines(case: Case, generated_dir, tmp_path):
    path = _source(case, generated_dir)
    result = run_cli("validate", str(path), cwd=tmp_path)
    output = result.stdout + result.stderr
    assert "Traceback" not in output
    assert result.stderr == ""
    errors = sum(1 for severity, *_ in case.expected if severity == "error")
    warnings = len(case.expected) - errors
    assert result.returncode == (1 if errors else 0), output
    lines = result.stdout.splitlines()
    assert lines, "no output at all"
    *findings, summary = lines
    got = Counter()
    for line in findings:
        assert FINDING_LINE.match(line), f"not a compiler-style finding line: {line!r}"
        parts = FINDING_PARTS.match(line)
        assert parts["file"] == str(path)
        got[(parts["severity"], parts["rule"], int(parts["line"]))] += 1
    assert got == Counter((severity, rule, line) for severity, rule, _, line in case.expected), result.stdout
    match = SUMMARY.match(summary)
    assert match, f"last line is not the summary: {summary!r}"
    assert (int(match["errors"]), int(match["warnings"])) == (errors, warnings)
    assert list(tmp_path.iterdir()) == [], "validate wrote into its working directory"


PROBE = """
import json, resource, sys, time
from fleetform.pipeline import check
start = time.perf_counter()
result = check(sys.argv[1])
elapsed = time.perf_counter() - start
try:  # VmHWM is this program's own peak; ru_maxrss keeps the peak of the process image before exec,
    # here a pytest that may have imported pulumi (Linux keeps signal->maxrss across execve)
    peak = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
except OSError:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"elapsed": elapsed, "peak": peak, "rules": [f.rule for f in result.findings]}))
"""


@pytest.mark.parametrize("name", ["009-size-alias-bomb.yaml", "010-size-deep-nesting.yaml", "gen-over-4mib.yaml"])
def test_hostile_input_is_rejected_fast_and_small(name, generated_dir, tmp_path):
    """A correctness bound, not a benchmark: the limits must stop the work early, not after it."""
    case = next(c for c in CASES if c.name == name)
    path = _source(case, generated_dir)
    result = subprocess.run([sys.executable, "-c", PROBE, str(path)], cwd=tmp_path, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    peak_mb = data["peak"] / (1024 * 1024 if sys.platform == "darwin" else 1024)  # ru_maxrss: bytes on macOS, KiB on Linux
    assert data["rules"] == ["yaml-size"]
    assert data["elapsed"] < 1.0, f"took {data['elapsed']:.2f} s"
    assert peak_mb < 100, f"peak RSS {peak_mb:.0f} MB"


def test_corpus_covers_every_rule():
    """A new rule needs a broken example here. Rules of stage
    `config` check what fleetform derived, which no blueprint can break: tests/test_slurm_rules.py
    breaks crafted configs for each of them instead. Rules of stage `diff` judge a change, not one
    blueprint: tests/test_update_safety.py and tests/test_diff.py break changes for each of them."""
    covered = {rule for case in CASES for _, rule, _, _ in case.expected}
    missing = sorted({r.id for r in all_rules() if r.stage not in ("config", "diff")} - covered)
    assert not missing, f"no corpus case for: {', '.join(missing)}"


def test_corpus_is_large_and_named_consistently():
    files = sorted(p.name for p in CORPUS.iterdir())
    assert len(files) >= 40
    assert all(re.fullmatch(r"\d{3}-[a-z0-9-]+\.yaml", name) for name in files), files
    numbers = [name[:3] for name in files]
    assert len(set(numbers)) == len(numbers), "two corpus files share a number"
