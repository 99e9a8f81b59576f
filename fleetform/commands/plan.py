"""fleetform plan BLUEPRINT [--format text|markdown|json]: the resources the Pulumi program would
create, recorded offline under Pulumi's mocks, and the security policies checked on them."""

from __future__ import annotations

import json
import sys
from collections import Counter

from ..findings import Finding, Severity, report_text


def add_parser(sub) -> None:
    p = sub.add_parser("plan", help="the cloud resources a blueprint creates, and security policies on them",
                       description="Validate and render a blueprint, run the Pulumi program under mocks (no Pulumi "
                                   "CLI or credentials needed) and report the resources it would create by fleet "
                                   "and type. A violated security policy is an error (exit 1).")
    p.add_argument("blueprint", metavar="BLUEPRINT")
    p.add_argument("--format", choices=("text", "markdown", "json"), default="text")
    p.set_defaults(run=run)


def _owner(resources: list[dict]) -> dict[str, str]:
    """Each resource's top-level component (a fleet's name, or network, storage, ...)."""
    parent = {r["name"]: r["parent"] for r in resources}
    owner = {}
    for r in resources:
        name = r["name"]
        while parent.get(name):
            name = parent[name]
        owner[r["name"]] = name
    return owner


def _short(type_: str) -> str:
    return type_.split(":")[-1] if not type_.startswith("fleetform:") else type_


def run(args) -> int:
    from ..cli import UsageError
    from ..pipeline import check
    from ..plan import record
    from ..policies import check as check_policies
    from ..render import render

    try:
        result = check(args.blueprint, display=args.blueprint)
    except OSError as err:
        raise UsageError(f"cannot read {args.blueprint}: {err.strerror or err}") from None
    if result.model is None:
        sys.stdout.write(report_text(result.findings, 1))
        return 1
    model, doc = result.model, result.document
    resources = record(model, render(model))
    owner = _owner(resources)
    fleet_paths = {f.name: f.path for f in model.fleets}
    findings = list(result.findings)
    for pid, name, message in check_policies(resources, model):
        findings.append(doc.finding(fleet_paths.get(owner.get(name), ()), f"{name}: {message}", pid))
    errors = any(f.severity is Severity.ERROR for f in findings)
    counts = Counter((owner[r["name"]], _short(r["type"])) for r in resources if not r["type"].startswith("fleetform:"))
    if args.format == "json":
        data = {"blueprint": {"name": model.name, "version": model.version, "sha256": model.sha256},
                "resources": resources,
                "findings": [f.to_dict() for f in sorted(findings, key=Finding.sort_key)]}
        sys.stdout.write(json.dumps(data, indent=2, sort_keys=True) + "\n")
        return 1 if errors else 0
    groups = sorted({g for g, _ in counts})
    if args.format == "markdown":
        lines = [f"### fleetform plan: {model.name} {model.version}", "",
                 f"{sum(counts.values())} cloud resources" if counts else "No cloud resources (on-prem blueprint).", ""]
        if counts:
            lines += ["| component | resource type | count |", "|---|---|---:|"]
            lines += [f"| {g} | {t} | {n} |" for (g, t), n in sorted(counts.items())]
        if findings:
            lines += ["", "**Findings**", ""] + [f"- `{f.to_text()}`" for f in sorted(findings, key=Finding.sort_key)]
        sys.stdout.write("\n".join(lines) + "\n")
        return 1 if errors else 0
    lines = [f"{model.name} {model.version}: {sum(counts.values())} cloud resources"
             if counts else f"{model.name} {model.version}: no cloud resources (on-prem blueprint)"]
    for group in groups:
        items = sorted((t, n) for (g, t), n in counts.items() if g == group)
        lines.append(f"  {group}: {sum(n for _, n in items)}")
        lines += [f"    {n:>3} {t}" for t, n in items]
    lines += [f.to_text() for f in sorted(findings, key=Finding.sort_key)]
    sys.stdout.write("\n".join(lines) + "\n")
    return 1 if errors else 0
