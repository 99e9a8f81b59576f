"""fleetform diff OLD NEW [--format text|markdown|json] [--detailed-exitcode]: what a blueprint
change does, for a pull request. (`diff --base REV BLUEPRINT...`, every blueprint of a pull request
in one call: fleetform/commands/diff_many.py.)

Each side is a blueprint file or a git `REV:path`. The diff leads with what costs money or loses
data: resources replaced (`-/+`, from the input that forces it, fleetform/changes.py), nodes rolled
or replaced, the cost and sizing deltas; then every changed input (old -> new), the rendered files
that change (unified diffs) and the findings the change introduces. `--format markdown` is a PR
comment within GitHub's size limit; `--format json` the same facts as data.
"""

from __future__ import annotations

import difflib
import io
import json
import os
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
    p.add_argument("sides", metavar="OLD NEW | BLUEPRINT", nargs="*",
                   help="OLD and NEW, the blueprint before and after the change (each a file, or REV:path in git); "
                        "with --base, any number of blueprints (paths), each compared with itself at REV")
    p.add_argument("--base", metavar="REV",
                   help="compare every BLUEPRINT given with its version at git revision REV in one call (a pull "
                        "request's changed blueprints, and those whose bases changed): one report with a section "
                        "per blueprint, added and removed ones included, one exit code")
    p.add_argument("--head", metavar="REV", help="with --base: the new side of each BLUEPRINT is REV:path, not the file")
    p.add_argument("--format", choices=("text", "markdown", "json"), default="text",
                   help="text for a terminal, markdown for a pull-request comment, json for tools (default: text)")
    p.add_argument("--detailed-exitcode", action="store_true",
                   help="exit 0 when nothing changes, 2 when something does, 1 on an error (like terraform plan)")
    p.add_argument("--no-resources", action="store_true", help=NO_RESOURCES_HELP)
    p.set_defaults(run=run)


def _extract(archive: bytes, target: Path) -> None:
    """A revision's tree as a checkout of it would be: files through tarfile's "data" filter, then
    symlinks as git stores them, absolute or leading out of the tree included (the filter refuses
    those, and a blueprint folder holding one is no reason for diff to fail). Links come last, so
    nothing is ever written through one; reading through one is judged as validate judges it (a
    blueprint or base that leads outside its repository is a finding)."""
    links = []
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        for member in tar:
            if member.issym() or member.islnk():
                links.append(member)
            elif member.isfile() or member.isdir():
                tar.extract(member, target, filter="data")
    for member in links:
        where = target / member.name
        if os.path.normpath(member.name).startswith(("..", "/")) or os.path.lexists(where):
            continue
        where.parent.mkdir(parents=True, exist_ok=True)
        # a hard link in git's archive is impossible; one in it is kept as the symlink it would be
        os.symlink(member.linkname, where)


def _materialize(spec: str, tmp: Path, exports: dict[str, Path] | None = None) -> tuple[str, str]:
    """(path to read, label) for a file or a git REV:path (REV:path names a path from the top of the
    repository, as git does). The revision's whole tree is exported, with a `.git` marker at its top:
    the blueprint's bases, and what a base may link to in the repository, come from the same
    revision, found as `validate` in a checkout of it finds them."""
    from ..cli import UsageError

    if Path(spec).exists() or ":" not in spec:
        return spec, spec
    rev, _, path = spec.partition(":")
    if rev.startswith("-") or not rev:
        # git would read it as an option (`--output=FILE` truncated a file); no revision starts with '-'
        raise UsageError(f"{spec}: {rev!r} is not a git revision" + (" (it would be read as an option)" if rev else ""))
    try:
        top, _, prefix = subprocess.run(["git", "rev-parse", "--show-toplevel", "--show-prefix"],
                                        capture_output=True, check=True, text=True).stdout.partition("\n")
        top, prefix = top.strip(), prefix.strip()
        if exports is None or rev not in exports:
            # --end-of-options (git 2.24+): nothing after it is an option, whatever it starts with
            archive = subprocess.run(["git", "archive", "--format=tar", "--end-of-options", rev],
                                     capture_output=True, check=True, cwd=top)
    except (OSError, subprocess.CalledProcessError) as err:
        detail = getattr(err, "stderr", b"") or str(err).encode()
        if isinstance(detail, str):
            detail = detail.encode()
        raise UsageError(f"cannot read {spec} from git: {detail.decode(errors='replace').strip()}") from None
    if exports is not None and rev in exports:  # one export of a revision for every blueprint of a call
        target = exports[rev]
    else:
        target = tmp / f"rev{len(list(tmp.iterdir()))}"
        target.mkdir()
        _extract(archive.stdout, target)
        (target / ".git").write_text("")  # the exported tree's top is its repository's top, as in a checkout
        if exports is not None:
            exports[rev] = target
    # git reads REV:./x and REV:../x from the current folder, any other REV:x from the top
    relative = os.path.normpath(prefix + path if path.startswith(("./", "../")) else path)
    # an absolute path joined to the export is itself (a file of this machine, not of the revision)
    if relative == ".." or relative.startswith(("../", "/")) or os.path.isabs(relative):
        raise UsageError(f"{spec}: the path leads outside the repository")
    if not (target / relative).is_file():
        raise UsageError(f"{spec}: no such file at {rev}")
    return str(target / relative), spec


def _side(spec: str, tmp: Path, resources: bool, exports: dict[str, Path] | None = None):
    from ..cli import UsageError
    from .plan import build

    path, label = _materialize(spec, tmp, exports)
    try:  # findings name REV:path, not a temporary copy
        result, built = build(path, resources, display=label)
    except OSError as err:  # a missing file, a FIFO or a device: a usage error, as validate says it
        raise UsageError(f"cannot read {spec}: {err.strerror or err}") from None
    return label, result, built


GITHUB_COMMENT_LIMIT = 65536
"""GitHub refuses issue and pull-request comments longer than 65,536 characters."""


def _file_changes(old_files: dict[str, bytes], new_files: dict[str, bytes]) -> list[dict]:
    changes = []
    for path in sorted(set(old_files) | set(new_files)):
        a, b = old_files.get(path), new_files.get(path)
        if a == b:
            continue
        mark = "+" if a is None else "-" if b is None else "~"
        diff = "".join(difflib.unified_diff((a or b"").decode().splitlines(keepends=True),
                                            (b or b"").decode().splitlines(keepends=True), f"a/{path}", f"b/{path}"))
        changes.append({"path": path, "change": mark, "diff": diff})
    return changes


def _fleet_costs(plan: dict, renames: dict[str, str] | None = None) -> dict[str, dict]:
    renames = renames or {}
    return {renames.get(f["fleet"], f["fleet"]): f for f in plan["cost"]["fleets"]}


def _renames(new: dict) -> dict[str, str]:
    """old fleet name -> new, from the aliases a renamed fleet's component keeps (`renamed_from`)."""
    return {alias: r["name"] for r in new.get("resources") or () if r["type"].startswith("fleetform:")
            for alias in r.get("aliases", ())}


def _cost(old: dict, new: dict) -> dict:
    """Per changed fleet and in total: $/month min and max on each side, and what is not priced."""
    fleets = []
    a_all, b_all = _fleet_costs(old, _renames(new)), _fleet_costs(new)
    for name in sorted(set(a_all) | set(b_all)):
        a, b = a_all.get(name), b_all.get(name)
        key = lambda f: (f["instance_type"], f["nodes"], f["usd_per_month"]) if f else None  # noqa: E731
        if key(a) == key(b):
            continue
        fleets.append({"fleet": name,
                       "old": None if a is None else {"instance_type": a["instance_type"], "nodes": a["nodes"],
                                                      "usd_per_month": a["usd_per_month"], "note": a["note"]},
                       "new": None if b is None else {"instance_type": b["instance_type"], "nodes": b["nodes"],
                                                      "usd_per_month": b["usd_per_month"], "note": b["note"]}})
    return {"fleets": fleets,
            "total_priced_usd_per_month": {"old": old["cost"]["total_usd_per_month"],
                                           "new": new["cost"]["total_usd_per_month"]},
            "unpriced": {"old": old["cost"]["unpriced"], "new": new["cost"]["unpriced"]}}


def _sizing(old: dict, new: dict) -> list[dict]:
    """Every sizing step whose result changes, by fleet: old -> new."""
    deltas = []
    renames = _renames(new)
    before = {(renames.get(s["fleet"], s["fleet"]), step["what"]): step["result"]
              for s in old["sizing"] for step in s["steps"]}
    after = {(s["fleet"], step["what"]): step["result"] for s in new["sizing"] for step in s["steps"]}
    for key in sorted(set(before) | set(after)):
        if before.get(key) != after.get(key):
            deltas.append({"fleet": key[0], "what": key[1], "old": before.get(key), "new": after.get(key)})
    return deltas


def _money_range(values) -> str:
    if values is None:
        return "none"
    if None in values:
        return "not priced"
    return f"${values[0]:,.0f}" if values[0] == values[1] else f"${values[0]:,.0f}-${values[1]:,.0f}"


def _delta(low: float, high: float) -> str:
    """A change of cost in dollars, one value where both ends of the range moved alike: `+$1,234`, `-$80 to +$0`."""
    show = lambda d: f"{'-' if round(d) < 0 else '+'}${abs(d):,.0f}"  # noqa: E731
    return show(low) if show(low) == show(high) else f"{show(low)} to {show(high)}"


def _side_text(side: dict | None) -> str:
    if side is None:
        return "none"
    low, high = side["nodes"]
    count = f"{low}" if low == high else f"{low}-{high}"
    money = _money_range(side["usd_per_month"])
    return f"{count} x {side['instance_type']} ({money if money == 'not priced' else money + ' a month'})"


def _cost_lines(cost: dict) -> list[str]:
    lines = []
    for fleet in cost["fleets"]:
        line = f"{fleet['fleet']}: {_side_text(fleet['old'])} -> {_side_text(fleet['new'])}"
        a, b = (fleet["old"] or {}).get("usd_per_month"), (fleet["new"] or {}).get("usd_per_month")
        if a is not None and b is not None and None not in a and None not in b:
            line += f", {_delta(b[0] - a[0], b[1] - a[1])} a month"
        lines.append(line)
    total = cost["total_priced_usd_per_month"]
    ta, tb = total["old"], total["new"]
    lines.append(f"total of what is priced: {_money_range(ta)} -> {_money_range(tb)} a month "
                 f"({_delta(tb[0] - ta[0], tb[1] - ta[1])})")
    unpriced_old, unpriced_new = set(cost["unpriced"]["old"]), set(cost["unpriced"]["new"])
    for item in sorted(unpriced_old | unpriced_new):
        side = "both sides" if item in unpriced_old and item in unpriced_new else \
            "before only" if item in unpriced_old else "after only"
        lines.append(f"not priced ({side}): {item}")
    return lines


def compute(old_label: str, old_built, new_label: str, new_built, old_result=None, new_result=None) -> dict:
    """The facts of a diff as data: the JSON format prints it, text and markdown render it. With the
    two sides' validation results (their models and the new side's document) it also says what each
    change does to running machines (its disruption class), which models are swapped, what a region
    move loses, and the findings of the change itself (rollout-fit, replace-stateful)."""
    from ..changes import CLASSES, SIGNS, Disruption, classify, compare, file_disruption, model_changes, \
        region_move, rollout_fit, _components, cluster_id_change, ray_fleets, slinky_fleets
    from ..pool import schedule_delta
    from ..rules import EKS_VERSION_STEP, REPLACE_STATEFUL, ROLLOUT_FIT
    from ..rules.eks import version_step

    (old, old_files, old_findings), (new, new_files, new_findings) = old_built, new_built
    old_model = old_result.model if old_result is not None else None
    new_model = new_result.model if new_result is not None else None
    regions = (old_model.region, new_model.region) if old_model and new_model else (None, None)
    unrecorded = next((d["resources_not_recorded"] for d in (old, new) if d["resources"] is None), None)
    resources = [] if unrecorded else compare(old["resources"], new["resources"], regions)
    files = _file_changes(old_files, new_files)
    disruptions = []
    if not unrecorded:
        owners = {**_components(old["resources"]), **_components(new["resources"])}
        disruptions = [classify(c, owners.get(c.name, ("", ""))) for c in resources]
    per_resource = list(disruptions)  # one per resource change, in its order: the diagram marks their parts
    grouped: dict[tuple, list] = {}  # the files of one fleet that do the same, on one line
    ray, slinky = ray_fleets(old_model, new_model), slinky_fleets(old_model, new_model)
    for item in files:
        found = file_disruption(item["path"], item["change"], old_files.get(item["path"]), new_files.get(item["path"]),
                                ray, slinky)
        if found is not None and not (found.cls == "rolling" and not unrecorded):  # resources show the Deployment
            grouped.setdefault((item["path"].split("/")[0], found.cls, found.how), []).append(found.what)
    for (_, cls, how), paths in grouped.items():
        disruptions.append(Disruption(cls, ", ".join(paths), how))
    allowed = {a.part for a in new_model.allow_replace} if new_model else set()
    for d in disruptions:
        d.waived = d.part in allowed
    swaps = model_changes(old_model, new_model, _renames(new)) if old_model and new_model else []
    move = region_move(old_model, new_model, disruptions) if old_model and new_model else None
    renamed = None if unrecorded else cluster_id_change(old["resources"], new["resources"], resources, disruptions)
    change_findings = []
    if new_model is not None and new_result.document is not None:
        doc = new_result.document
        for path, message, hint in rollout_fit(new_model, disruptions, resources):
            change_findings.append(doc.finding(path, message, ROLLOUT_FIT, hint))
        same_cluster = old_model is not None and old_model.name == new_model.name and not renamed and not move
        step = version_step(old_model, new_model) if same_cluster else None
        if step is not None:
            change_findings.append(doc.finding(step[0], step[1], EKS_VERSION_STEP, step[2]))
        for d in disruptions:
            if d.part and not d.waived and d.cls in ("replace with state", "data loss"):
                owner, _, kind = d.part.partition("/")
                where = (next((s.path for s in new_model.storage if s.name == kind), ()) if owner == "storage" else
                         next((f.path + ("scheduler",) for f in new_model.fleets if f.name == owner), ()))
                change_findings.append(doc.finding(
                    ("update_safety",) if "update_safety" in doc.data else where, f"{d.what} ({d.part}) is "
                    f"{d.cls}: {d.how}", REPLACE_STATEFUL,
                    f"copy what it holds first; then allow it: `update_safety: {{allow_replace: [{{part: {d.part}, "
                    f"reason: ...}}]}}` (remove the entry once the change is applied)"))
    disruptions.sort(key=lambda d: (-CLASSES.index(d.cls), d.what))
    before = {(f.rule, f.path): f for f in old_findings}
    introduced = [f for f in new_findings if (f.rule, f.path) not in before] + change_findings
    changed = [(before[(f.rule, f.path)], f) for f in new_findings
               if (f.rule, f.path) in before and before[(f.rule, f.path)].message != f.message]
    after = {(f.rule, f.path) for f in new_findings}
    resolved = [f for f in old_findings if (f.rule, f.path) not in after]
    counts = {action: sum(1 for c in resources if c.action == action) for action in SIGNS}
    effects = [effect for c in resources for effect in c.effects]
    worst = disruptions[0].cls if disruptions else "none"
    if move and move["data_lost"]:  # also when the resources were not compared: the move loses them all the same
        worst = "data loss"
    diagram = None
    if old_model is not None and new_model is not None:
        diagram = _diagram(old_model, new_model, old, new, resources, per_resource, files, old_files, new_files)
    return {"old": old_label, "new": new_label, "resources_not_recorded": unrecorded,
            "summary": {"resources": None if unrecorded else counts, "effects": effects,
                        "disruption": worst,
                        "rendered_files_changed": len(files),
                        "findings_introduced": len(introduced)},
            "disruptions": [d.to_dict() for d in disruptions],
            "model_changes": swaps, "region_move": move, "diagram": diagram,
            **({"cluster_id_change": renamed} if renamed else {}),  # only where the id moves: other diffs keep their keys
            **({"schedule": schedule_delta(old.get("pools", []), new.get("pools", []))}
               if old.get("pools") or new.get("pools") else {}),  # pools (fleetform/pool.py): the ledger's delta
            "resources": [c.to_dict() for c in resources],
            "cost": _cost(old, new), "sizing": _sizing(old, new),
            "rendered_files": files,
            "findings_introduced": [f.to_dict() for f in introduced],
            "findings_changed": [{"old": a.to_dict(), "new": b.to_dict()} for a, b in changed],
            "findings_resolved": [f.to_dict() for f in resolved],
            "_introduced": introduced, "_changed": changed, "_resolved": resolved}


def _diagram(old_model, new_model, old: dict, new: dict, resources, per_resource, files, old_files, new_files) -> str:
    """The new blueprint's diagram with what the old one had and the new one lacks, each part a change
    touches marked (fleetform/diagram.py)."""
    from ..changes import _components
    from ..diagram import graph, merge, mermaid, touched_parts

    owners = {**_components(old["resources"] or []), **_components(new["resources"] or [])}
    touched = touched_parts(old_model, new_model, resources, per_resource, owners,
                            [(item, old_files.get(item["path"]), new_files.get(item["path"])) for item in files])
    merged, marks = merge(graph(old_model, old["resources"]), graph(new_model, new["resources"]), touched,
                          _renames(new))
    return mermaid(merged, marks)


def has_changes(data: dict) -> bool:
    return bool(data["resources"] or data["rendered_files"] or data["cost"]["fleets"] or data["sizing"]
                or data.get("schedule"))


def _resource_lines(data: dict, markdown: bool) -> list[str]:
    from ..changes import SIGNS, show_value

    lines = []
    for change in data["resources"]:
        head = f"{SIGNS[change['action']]} {change['type'].split(':')[-1]} {change['name']}"
        if change.get("old_name"):
            head += f" (was {change['old_name']})"
        if change.get("replacement_data") == "missing":
            head += " (no replacement data for this type: shown as an update)"
        lines.append(f"- `{head}`" if markdown else f"  {head}")
        for item in change["inputs"]:
            text = f"{item['path']}: {show_value(item['old'])} -> {show_value(item['new'])}"
            if item.get("via"):
                text += f" (from {item['via']})"
            if item["forces_replacement"]:
                text += " forces replacement"
            lines.append(f"  - {text}" if markdown else f"      {text}")
    return lines


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _summary_lines(data: dict, markdown: bool) -> list[str]:
    counts = data["summary"]["resources"]
    files, findings = data["summary"]["rendered_files_changed"], data["summary"]["findings_introduced"]
    resources = (f"cloud resources not compared ({data['resources_not_recorded']})"
                 if data["resources_not_recorded"] else
                 f"{counts['replace']} to replace, {counts['create']} to create, {counts['delete']} to delete, "
                 f"{counts['update']} to update in place")
    lines = [f"{resources}; {_count(files, 'rendered file')} changed; {_count(findings, 'new finding')}"]
    lines += data["summary"]["effects"]
    from ..changes import model_change_text

    lines += [model_change_text(item) for item in data.get("model_changes", ())]
    if data.get("schedule"):
        from ..pool import schedule_text

        lines += [schedule_text(item, None if counts is None else counts["replace"]) for item in data["schedule"]]
    if data.get("disruptions") is not None:
        lines.append(f"most disruptive: {data['summary']['disruption']}" +
                     ((" (of the rendered files and the region move: the cloud resources were not compared)"
                       if data.get("region_move") else
                       " (of the rendered files: the cloud resources were not compared)")
                      if data["resources_not_recorded"] else ""))
    return [(f"- {line}" if markdown else f"  {line}") for line in lines]


def _disruption_lines(data: dict, markdown: bool) -> list[str]:
    """Each change above "in place" on its own line; resources merely updated, replaced with nothing
    stored on them, or created, counted (the resource list names them; JSON has every one)."""
    lines = []
    from ..changes import GENERIC

    quiet = [d for d in data["disruptions"] if d["how"] in GENERIC and not d.get("part")]
    for d in data["disruptions"]:
        if d in quiet:
            continue
        waiver = ""
        if d.get("part"):
            waiver = (f" (allowed: update_safety.allow_replace {d['part']})" if d["waived"] else
                      f" (not allowed: {d['part']} is not in update_safety.allow_replace)")
        text = f"[{d['class']}] {d['what']}: {d['how']}{waiver}"
        lines.append(f"- {text}" if markdown else f"  {text}")
    if quiet:
        counts = {c: sum(1 for d in quiet if d["class"] == c) for c in ("in place", "none")}
        text = (f"and {_count(counts['in place'], 'cloud resource')} updated in place or replaced with nothing "
                f"stored on them, {counts['none']:,} created or retagged: nothing running notices these")
        lines.append(f"- {text}" if markdown else f"  {text}")
    return lines


def _region_lines(move: dict, markdown: bool) -> list[str]:
    bullet = (lambda t: f"- {t}") if markdown else (lambda t: f"  {t}")
    lines = [bullet(f"every regional resource is replaced: the VPC and subnets, the buckets, the file systems, the "
                    f"EKS cluster and its node groups, the Slurm controller and its state volume (IAM is global "
                    f"and stays)")]
    lines += [bullet(f"data lost: {what}") for what in move["data_lost"]]
    lines += [bullet(f"to move safely, step {i}: {step}") for i, step in enumerate(move["steps"], 1)]
    return lines


def _cluster_id_lines(change: dict, markdown: bool) -> list[str]:
    bullet = (lambda t: f"- {t}") if markdown else (lambda t: f"  {t}")
    lines = [bullet(f"the cluster id (metadata.name and the Pulumi stack) moves from {change['old']} to {change['new']}: "
                    f"`pulumi up` on the same stack replaces {change['replaced']} resources named after it or built "
                    "on them, and re-tags the rest")]
    lines += [bullet(line) for line in change["eks"]]
    lines += [bullet(f"data lost: {what}") for what in change["data_lost"]]
    lines += [bullet(f"to rename safely, step {i}: {step}") for i, step in enumerate(change["steps"], 1)]
    return lines


def render_text(data: dict, markdown: bool, limit: int = GITHUB_COMMENT_LIMIT, diagram: bool = True) -> str:
    """The diff as text or markdown; markdown longer than `limit` keeps everything before the file
    diffs and as many of those as fit (diff --base gives each blueprint a share of one comment), and when
    that is still too long, leaves out the diagram (up to Mermaid's 50,000 characters: it grows with the
    fleets and models) and says why."""
    out: list[str] = []
    heading = (lambda t: ["", f"#### {t}", ""]) if markdown else (lambda t: ["", f"== {t}"])
    bullet = (lambda t: f"- {t}") if markdown else (lambda t: f"  {t}")
    out.append(f"### fleetform diff: {data['old']} -> {data['new']}" if markdown
               else f"fleetform diff {data['old']} -> {data['new']}")
    out += heading("What this change does")
    out += _summary_lines(data, markdown)
    if markdown:
        from ..diagram import markdown as diagram_markdown

        if diagram or not data.get("diagram"):
            out += diagram_markdown(data.get("diagram"), "Diagram: what the change touches")
        else:
            out += heading("Diagram: what the change touches")
            out.append("_Not shown: with it this comment would be longer than " +
                       ("GitHub's limit" if limit == GITHUB_COMMENT_LIMIT else "this blueprint's share of GitHub's limit")
                       + f" ({limit:,} characters); `--format json` has its source (`diagram`)._")
    if data["region_move"]:
        out += heading(f"Region move: {data['region_move']['old']} -> {data['region_move']['new']}")
        out += _region_lines(data["region_move"], markdown)
    if data.get("cluster_id_change"):
        change = data["cluster_id_change"]
        out += heading(f"Cluster id change: {change['old']} -> {change['new']}")
        out += _cluster_id_lines(change, markdown)
    if data["disruptions"]:
        out += heading(f"What running machines and stored data go through: {len(data['disruptions'])} changes, "
                       "most disruptive first (classes: docs/update-safety.md)")
        out += _disruption_lines(data, markdown)
    out += heading("Cost per month (730 h, on-demand prices of the catalog)")
    out += [bullet(line) for line in _cost_lines(data["cost"])]
    if data["sizing"]:
        out += heading("Sizing")
        out += [bullet(f"{d['fleet']}: {d['what']}: {d['old'] or 'none'} -> {d['new'] or 'none'}")
                for d in data["sizing"]]
    counts = data["summary"]["resources"]
    out += heading(f"Cloud resources: not compared: {data['resources_not_recorded']}"
                   if data["resources_not_recorded"] else
                   f"Cloud resources: {counts['replace']} to replace, {counts['create']} to create, "
                   f"{counts['delete']} to delete, {counts['update']} to update")
    out += _resource_lines(data, markdown)
    introduced = data["_introduced"]
    out += heading(f"Findings the change introduces: {len(introduced)}")
    out += [(f"- `{f.to_text()}`" if markdown else f"  {f.to_text()}") for f in introduced]
    if data["_changed"]:
        out += heading(f"Findings that change: {len(data['_changed'])}")
        for a, b in data["_changed"]:
            out += ([f"- was `{a.to_text()}`", f"  now `{b.to_text()}`"] if markdown
                    else [f"  was {a.to_text()}", f"  now {b.to_text()}"])
    if data["_resolved"]:
        out += heading(f"Findings the change resolves: {len(data['_resolved'])}")
        out += [(f"- `{f.to_text()}`" if markdown else f"  {f.to_text()}") for f in data["_resolved"]]
    out += heading(f"Rendered files: {len(data['rendered_files'])} changed")
    files_at = len(out)
    for item in data["rendered_files"]:
        if markdown:
            out += [f"<details><summary>{item['change']} <code>{item['path']}</code></summary>", "", "```diff",
                    item["diff"].rstrip("\n"), "```", "", "</details>"]
        else:
            out += [f"{item['change']} {item['path']}", item["diff"].rstrip("\n")]
    text = "\n".join(out) + "\n"
    if markdown and len(text) > limit:
        text = _fit_comment(out[:files_at], data["rendered_files"], limit)
        if len(text) > limit and diagram and data.get("diagram"):
            return render_text(data, markdown, limit, diagram=False)
    return text


def _fit_comment(lead: list[str], files: list[dict], limit: int = GITHUB_COMMENT_LIMIT) -> str:
    """The comment within GitHub's limit: everything before the file diffs whole, then as many file
    diffs as fit, then the names of the rest."""
    budget = limit - 2000
    text = "\n".join(lead) + "\n"
    shown = 0
    for item in files:
        block = "\n".join([f"<details><summary>{item['change']} <code>{item['path']}</code></summary>", "",
                           "```diff", item["diff"].rstrip("\n"), "```", "", "</details>"]) + "\n"
        if len(text) + len(block) > budget:
            break
        text += block
        shown += 1
    rest = files[shown:]
    if rest:
        names = ", ".join(f"`{item['path']}`" for item in rest)
        note = (f"\n_{len(rest)} more changed files are not shown here (GitHub's comment limit is "
                f"{GITHUB_COMMENT_LIMIT:,} characters); run `fleetform diff` locally for them: {names}_\n")
        if len(text) + len(note) > limit:
            note = (f"\n_{len(rest)} more changed files are not shown here (GitHub's comment limit); run "
                    "`fleetform diff` locally for them._\n")
        text += note
    return text


def run(args) -> int:
    from ..cli import UsageError

    if args.base is not None:
        if not args.sides:
            raise UsageError("--base REV needs the blueprints to compare (BLUEPRINT...)")
        from .diff_many import run_many

        return run_many(args)
    if args.head is not None:
        raise UsageError("--head needs --base")
    if len(args.sides) != 2:
        raise UsageError(f"diff takes OLD and NEW (got {len(args.sides)} argument{'' if len(args.sides) == 1 else 's'}); "
                         "or --base REV BLUEPRINT... for several blueprints")
    args.old, args.new = args.sides
    with tempfile.TemporaryDirectory(prefix="fleetform-diff-") as tmpdir:
        tmp = Path(tmpdir)
        old_label, old_result, old_built = _side(args.old, tmp, not args.no_resources)
        new_label, new_result, new_built = _side(args.new, tmp, not args.no_resources)
    if old_built is None or new_built is None:  # the sides that do not validate, in one report: a finding both
        failed = [r for r in (old_result, new_result) if r.model is None]  # share (a base) is printed once
        sys.stdout.write(report_text([f for r in failed for f in r.findings], len(failed)))
        sys.stdout.write("no diff: a side does not validate\n")
        return 1
    data = compute(old_label, old_built, new_label, new_built, old_result, new_result)
    if args.format == "json":
        public = {k: v for k, v in data.items() if not k.startswith("_")}
        sys.stdout.write(json.dumps(public, indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(render_text(data, args.format == "markdown"))
    if any(f.severity.value == "error" for f in data["_introduced"]):
        return 1
    unrecorded = data["resources_not_recorded"]
    if unrecorded and not args.no_resources:  # asked for, not compared: see plan.py
        sys.stdout.flush()
        if args.detailed_exitcode:  # there 2 means "changes": an error is 1, as in `terraform plan`
            print(f"fleetform: error: {unrecorded}", file=sys.stderr)
            return 1
        raise UsageError(unrecorded)
    if args.detailed_exitcode:
        return 2 if has_changes(data) else 0
    return 0
