"""fleetform diff --base REV [--head REV] BLUEPRINT...: every blueprint of a pull request in one call.

Each BLUEPRINT is a path from the current folder, as in a checkout: its old side is REV:path, its
new side the file (or HEAD_REV:path with --head). One process: pulumi and the providers are imported
once and each revision's tree is exported once, however many blueprints there are (benchmarks/diff_many.py
measures it). Each blueprint gets a section:

- changed: the diff of `fleetform diff REV:path path`;
- unchanged: one line (also a blueprint whose base did not change what it renders or records);
- added (not at REV): its plan; removed (not on the new side): what its plan at REV recorded;
- failed: why (findings of a side that does not validate, a file that cannot be read, a bug), so
  a blueprint that could not be compared never vanishes from the comment.

One exit code: 1 when any blueprint failed, else with --detailed-exitcode 2 when any changed (added
and removed count as changes) and 0 when none did; 3 only for a bug, after every blueprint had its turn.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from ..findings import report_text

STATUSES = ("failed", "removed", "changed", "added", "unchanged")
"""Section order: what needs a reviewer's attention first. A removed blueprint (a cluster to be
destroyed) is two lines and comes before the added ones, whose whole plans are not shortened to a
share of the comment: the comment workflow cuts the comment at GitHub's limit, which would take a
removal after a few added plans with it."""


class _Failed(Exception):
    """One blueprint could not be compared; the message is its section's text."""


def _exists_at(rev: str, path: str) -> bool:
    """Whether git has a file at REV:path (path from the current folder, as `git cat-file` reads ./path)."""
    spec = _spec(rev, path)
    return subprocess.run(["git", "cat-file", "-e", "--end-of-options", spec], capture_output=True).returncode == 0


def _spec(rev: str, path: str) -> str:
    """REV:path naming the file at the current folder's path (git reads REV:./x from the current folder,
    REV:x from the top: the same at the top, where CI runs)."""
    if path.startswith(("./", "../")) or not _prefix():
        return f"{rev}:{path}"
    return f"{rev}:./{path}"


def _prefix() -> str:
    """The current folder's path from the top of its repository ('' at the top)."""
    return subprocess.run(["git", "rev-parse", "--show-prefix"], capture_output=True, text=True).stdout.strip()


def run_many(args) -> int:
    from ..cli import UsageError
    from . import diff as one

    rev_ok = subprocess.run(["git", "rev-parse", "--verify", "--quiet", "--end-of-options", f"{args.base}^{{commit}}"],
                            capture_output=True)
    if args.base.startswith("-") or rev_ok.returncode != 0:
        raise UsageError(f"--base {args.base}: not a git revision here")
    if args.head and (args.head.startswith("-") or subprocess.run(
            ["git", "rev-parse", "--verify", "--quiet", "--end-of-options", f"{args.head}^{{commit}}"],
            capture_output=True).returncode != 0):
        raise UsageError(f"--head {args.head}: not a git revision here")
    resources = not args.no_resources
    sections: list[dict] = []
    bug = False
    seen: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="fleetform-diff-") as tmpdir:
        exports: dict[str, Path] = {}  # one export of each revision's tree for every blueprint
        for path in args.sides:
            path = os.path.relpath(path) if os.path.isabs(path) else path  # REV:path names it from here
            if path in seen:
                continue
            seen.add(path)
            try:
                sections.append(_section(one, path, args.base, args.head, resources, Path(tmpdir), exports))
            except _Failed as err:
                sections.append({"blueprint": path, "status": "failed", "error": str(err)})
            except UsageError as err:
                sections.append({"blueprint": path, "status": "failed", "error": f"fleetform: error: {err}"})
            except Exception as err:  # a bug: said in its section, the others still compared, exit 3 at the end
                if getattr(args, "debug", False) or os.environ.get("FLEETFORM_DEBUG"):
                    raise
                bug = True
                sections.append({"blueprint": path, "status": "failed",
                                 "error": f"fleetform: internal error: {type(err).__name__}: {err} (a bug in "
                                          "fleetform, not in the blueprint; run again with --debug)"})
    sections.sort(key=lambda s: STATUSES.index(s["status"]))
    counts = {status: sum(1 for s in sections if s["status"] == status) for status in STATUSES}
    if args.format == "json":
        public = [{k: v for k, v in s.items() if not k.startswith("_")} for s in sections]
        for s in public:
            if isinstance(s.get("diff"), dict):
                s["diff"] = {k: v for k, v in s["diff"].items() if not k.startswith("_")}
        sys.stdout.write(json.dumps({"base": args.base, "head": args.head, "summary": counts, "blueprints": public},
                                    indent=2, sort_keys=True) + "\n")
    else:
        sys.stdout.write(_text(sections, counts, args.base, args.head, args.format == "markdown"))
    if bug:
        return 3
    if counts["failed"]:
        return 1
    if args.detailed_exitcode:
        return 2 if counts["changed"] + counts["added"] + counts["removed"] else 0
    return 0


def _side_or_none(one, spec: str | None, tmp: Path, resources: bool, exports: dict[str, Path]):
    """(label, result, built) of one side, or None where the blueprint is not on that side."""
    if spec is None:
        return None
    return one._side(spec, tmp, resources, exports)


def _section(one, path: str, base: str, head: str | None, resources: bool, tmp: Path, exports) -> dict:
    old_spec = _spec(base, path) if _exists_at(base, path) else None
    if head:
        new_spec = _spec(head, path) if _exists_at(head, path) else None
    else:
        new_spec = path if Path(path).is_file() else None
    if old_spec is None and new_spec is None:
        raise _Failed(f"fleetform: error: {path}: no such blueprint at {base} nor at {head or 'the current files'}")
    old = _side_or_none(one, old_spec, tmp, resources, exports)
    new = _side_or_none(one, new_spec, tmp, resources, exports)
    failed = [side for side in (old, new) if side is not None and side[2] is None]
    if failed:
        raise _Failed("".join(report_text(result.findings, 1) for _, result, _ in failed)
                      + "no diff: a side does not validate")
    if old is None or new is None:
        label, _, (data, _files, findings) = new or old
        status = "added" if old is None else "removed"
        if data["resources"] is None and resources:  # asked for and not recorded: see plan.py
            raise _Failed(f"fleetform: error: {data['resources_not_recorded']}")
        section = {"blueprint": path, "status": status, "side": label,
                   "plan": data, "_findings": findings}
        if status == "added" and any(f.severity.value == "error" for f in findings):
            section["status"] = "failed"
            section["error"] = "the new blueprint's plan has errors (see its findings)"
        return section
    data = one.compute(old[0], old[2], new[0], new[2], old[1], new[1])
    if data["resources_not_recorded"] and resources:
        raise _Failed(f"fleetform: error: {data['resources_not_recorded']}")
    changed = one.has_changes(data) or bool(data["_introduced"] or data["_changed"] or data["_resolved"])
    section = {"blueprint": path, "status": "changed" if changed else "unchanged", "diff": data}
    if any(f.severity.value == "error" for f in data["_introduced"]):
        section["status"] = "failed"
        section["error"] = "the change introduces errors (see its findings)"
    return section


def _text(sections: list[dict], counts: dict, base: str, head: str | None, markdown: bool) -> str:
    from .plan import _with_findings, text_lines

    title = f"fleetform diff against {base}" + (f" ({head})" if head else "")
    summary = ", ".join(f"{n} {status}" for status, n in counts.items() if n) or "no blueprints"
    out = [f"## {title}: {summary}" if markdown else f"{title}: {summary}"]
    unchanged = [s["blueprint"] for s in sections if s["status"] == "unchanged"]
    shown = [s for s in sections if s["status"] != "unchanged"]
    from .diff import GITHUB_COMMENT_LIMIT

    # each shown section gets an equal share of the comment; a diff too long for it keeps its lead
    # and as many file diffs as fit (diff.render_text), never crowding the next blueprint out
    share = (GITHUB_COMMENT_LIMIT - 4000) // max(len(shown), 1)
    for s in shown:
        out.append("")
        head_line = f"{s['blueprint']}: {s['status']}"
        if s["status"] == "failed":
            out.append(f"### {head_line}" if markdown else f"== {head_line}")
            if "diff" in s:
                out += ["", _render_diff(s["diff"], markdown, share).rstrip("\n")]
            elif "plan" in s:
                out += ["", "\n".join(_with_findings(text_lines(s["plan"], markdown), s["_findings"], markdown))]
            out += (["", "~~~text", s["error"].rstrip("\n"), "~~~"] if markdown else [s["error"].rstrip("\n")])
        elif s["status"] == "changed":
            out.append(_render_diff(s["diff"], markdown, share).rstrip("\n"))
        elif s["status"] == "added":
            out += [f"### {head_line} (not at {base}): its plan" if markdown else f"== {head_line}: its plan", ""]
            out.append("\n".join(_with_findings(text_lines(s["plan"], markdown), s["_findings"], markdown)))
        else:  # removed
            resources = s["plan"]["resources"]
            counted = "" if resources is None else \
                f": {sum(1 for r in resources if not r['type'].startswith('fleetform:'))} cloud resources recorded there"
            out += [f"### {head_line} (it was at {base}{counted})" if markdown else f"== {head_line} (at {base}{counted})",
                    "", ("- " if markdown else "  ") + "no longer rendered or planned from this revision"]
    if unchanged:
        out += ["", ("- " if markdown else "") + f"unchanged (nothing rendered, recorded, priced or found differs): "
                + ", ".join(f"`{p}`" if markdown else p for p in unchanged)]
    return "\n".join(out) + "\n"


def _render_diff(data: dict, markdown: bool, limit: int) -> str:
    from .diff import render_text

    return render_text(data, markdown, limit=limit)
