"""fleetform diff OLD NEW [--format text|markdown]: what a blueprint change does, for a pull request.

Each side is a blueprint file or a git `REV:path`. The diff lists the rendered files that change
(unified diffs), the cloud resources created, deleted and changed (with the inputs that changed),
the cost delta, and the findings the change introduces. `--format markdown` is a PR comment.
"""

from __future__ import annotations

import difflib
import io
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from ..findings import report_text
from .plan import NO_RESOURCES_HELP


def add_parser(sub) -> None:
    p = sub.add_parser("diff",
                       description="Compare two versions of a blueprint, each a file or a git REV:path (e.g. "
                                   "origin/main:blueprints/llm.yaml), and report the rendered files that change, the "
                                   "cloud resources created, deleted and changed, the cost delta and the findings the "
                                   "change introduces.")
    p.add_argument("old", metavar="OLD", help="the blueprint before the change: a file, or REV:path in git")
    p.add_argument("new", metavar="NEW", help="the blueprint after the change: a file, or REV:path in git")
    p.add_argument("--format", choices=("text", "markdown"), default="text",
                   help="text for a terminal, markdown for a pull request comment (default: text)")
    p.add_argument("--no-resources", action="store_true", help=NO_RESOURCES_HELP)
    p.set_defaults(run=run)


def _materialize(spec: str, tmp: Path) -> tuple[str, str]:
    """(path to read, label) for a file or a git REV:path; a revision's folder is exported whole, so
    the blueprint's bases come from the same revision."""
    from ..cli import UsageError

    if Path(spec).exists() or ":" not in spec:
        return spec, spec
    rev, _, path = spec.partition(":")
    folder = str(Path(path).parent)
    try:
        archive = subprocess.run(["git", "archive", "--format=tar", rev, "--", folder], capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError) as err:
        detail = getattr(err, "stderr", b"") or str(err).encode()
        raise UsageError(f"cannot read {spec} from git: {detail.decode(errors='replace').strip()}") from None
    target = tmp / rev.replace("/", "_")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(target, filter="data")
    if not (target / path).is_file():
        raise UsageError(f"{spec}: no such file at {rev}")
    return str(target / path), spec


def _side(spec: str, tmp: Path, resources: bool):
    from .plan import build

    path, label = _materialize(spec, tmp)
    result, built = build(path, resources)
    return label, result, built


MANIFEST_TAG = "fleetform:manifest-sha256"


def _without_manifest_tag(value):
    """The inputs less the manifest-sha256 tag (also inside tag specifications and ASG tag lists),
    which every change of a rendered file changes: it is reported once, not for every resource."""
    if isinstance(value, dict):
        return {k: _without_manifest_tag(v) for k, v in value.items()
                if k != MANIFEST_TAG and not (value.get("key") == MANIFEST_TAG and k == "value")}
    if isinstance(value, list):
        return [_without_manifest_tag(v) for v in value if not (isinstance(v, dict) and v.get("key") == MANIFEST_TAG)]
    return value


def _resource_changes(old: list[dict], new: list[dict]) -> list[tuple[str, str, str, list[str]]]:
    before = {(r["type"], r["name"]): {**r, "inputs": _without_manifest_tag(r["inputs"])} for r in old}
    after = {(r["type"], r["name"]): {**r, "inputs": _without_manifest_tag(r["inputs"])} for r in new}
    changes = []
    for key in sorted(set(before) | set(after)):
        type_ = key[0].split(":")[-1]
        if key not in before:
            changes.append(("+", type_, key[1], []))
        elif key not in after:
            changes.append(("-", type_, key[1], []))
        else:
            a, b = before[key]["inputs"], after[key]["inputs"]
            changed = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
            if changed:
                changes.append(("~", type_, key[1], changed))
    return changes


def _money(value) -> str:
    return "not priced" if value is None else f"${value:,.2f}"


def _cost_lines(old: dict, new: dict) -> list[str]:
    lines = []
    fleets_old = {f["fleet"]: f for f in old["cost"]["fleets"]}
    fleets_new = {f["fleet"]: f for f in new["cost"]["fleets"]}
    for name in sorted(set(fleets_old) | set(fleets_new)):
        a, b = fleets_old.get(name), fleets_new.get(name)
        pa = a["usd_per_month"] if a else [0, 0]
        pb = b["usd_per_month"] if b else [0, 0]
        if (a and b) and (a["instance_type"], a["nodes"], pa) == (b["instance_type"], b["nodes"], pb):
            continue
        describe = lambda f: f"{f['nodes'][0]}-{f['nodes'][1]} x {f['instance_type']}" if f else "none"  # noqa: E731
        if None in pa or None in pb:
            note = (b or a)["note"]
            lines.append(f"{name}: {describe(a)} -> {describe(b)}; cost not priced ({note})")
        else:
            delta = [pb[0] - pa[0], pb[1] - pa[1]]
            lines.append(f"{name}: {describe(a)} -> {describe(b)}; ${pa[0]:,.0f}-${pa[1]:,.0f} -> "
                         f"${pb[0]:,.0f}-${pb[1]:,.0f} a month ({delta[0]:+,.0f} to {delta[1]:+,.0f})")
    ta, tb = old["cost"]["total_usd_per_month"], new["cost"]["total_usd_per_month"]
    lines.append(f"total priced: ${ta[0]:,.0f}-${ta[1]:,.0f} -> ${tb[0]:,.0f}-${tb[1]:,.0f} a month "
                 f"({tb[0] - ta[0]:+,.0f} to {tb[1] - ta[1]:+,.0f})")
    return lines


def run(args) -> int:
    with tempfile.TemporaryDirectory(prefix="fleetform-diff-") as tmpdir:
        tmp = Path(tmpdir)
        old_label, old_result, old_built = _side(args.old, tmp, not args.no_resources)
        new_label, new_result, new_built = _side(args.new, tmp, not args.no_resources)
    if old_built is None or new_built is None:
        for result in (old_result, new_result):
            if result.model is None:
                sys.stdout.write(report_text(result.findings, 1))
        sys.stdout.write("no diff: a side does not validate\n")
        return 1
    (old, old_files, old_findings), (new, new_files, new_findings) = old_built, new_built
    markdown = args.format == "markdown"
    out: list[str] = []
    heading = (lambda t: ["", f"#### {t}", ""]) if markdown else (lambda t: ["", f"== {t}"])
    out.append(f"### fleetform diff: {old_label} -> {new_label}" if markdown else f"fleetform diff {old_label} -> {new_label}")

    paths = sorted((set(old_files) | set(new_files)) - {"manifest.json"})
    changed = [p for p in paths if old_files.get(p) != new_files.get(p)]
    out += heading(f"Rendered files: {len(changed)} changed")
    for path in changed:
        a = old_files.get(path, b"").decode().splitlines(keepends=True)
        b = new_files.get(path, b"").decode().splitlines(keepends=True)
        mark = "+" if path not in old_files else "-" if path not in new_files else "~"
        diff = "".join(difflib.unified_diff(a, b, f"a/{path}", f"b/{path}"))
        if markdown:
            out += [f"<details><summary>{mark} <code>{path}</code></summary>", "", "```diff", diff.rstrip("\n"), "```",
                    "", "</details>"]
        else:
            out += [f"{mark} {path}", diff.rstrip("\n")]

    unrecorded = next((d["resources_not_recorded"] for d in (old, new) if d["resources"] is None), None)
    changes = [] if unrecorded else _resource_changes(old["resources"], new["resources"])
    counts = {sign: sum(1 for c in changes if c[0] == sign) for sign in "+-~"}
    out += heading(f"Cloud resources: not compared: {unrecorded}" if unrecorded else
                   f"Cloud resources: {counts['+']} to create, {counts['-']} to delete, {counts['~']} to change")
    if old_files["manifest.json"] != new_files["manifest.json"] and not unrecorded:
        note = "every tagged resource's fleetform:manifest-sha256 tag changes with the rendered files"
        out.append(f"- _{note}_" if markdown else f"  ({note})")
    for sign, type_, name, keys in changes:
        line = f"{sign} {type_} {name}" + (f" ({', '.join(keys)})" if keys else "")
        out.append(f"- `{line}`" if markdown else f"  {line}")

    out += heading("Cost per month")
    out += [(f"- {line}" if markdown else f"  {line}") for line in _cost_lines(old, new)]

    seen = {(f.rule, f.path, f.message) for f in old_findings}
    introduced = [f for f in new_findings if (f.rule, f.path, f.message) not in seen]
    out += heading(f"Findings the change introduces: {len(introduced)}")
    out += [(f"- `{f.to_text()}`" if markdown else f"  {f.to_text()}") for f in introduced]
    sys.stdout.write("\n".join(out) + "\n")
    if any(f.severity.value == "error" for f in introduced):
        return 1
    if unrecorded and not args.no_resources:  # asked for, not compared: see plan.py
        from ..cli import UsageError

        sys.stdout.flush()
        raise UsageError(unrecorded)
    return 0
