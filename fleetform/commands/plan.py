"""fleetform plan BLUEPRINT [--format text|markdown|json]: sizing with every step shown, cost from
the catalog's dated prices, the AWS resources the Pulumi program would create (recorded offline
under Pulumi's mocks) and the security policies checked on them.

Only the resource plan needs Pulumi (the `aws` extra). Without it, an AWS blueprint's plan shows
everything else and says how to install the extra, then exits 2: the resources and their security
policies were asked for and not checked, so a CI gate must not pass. `--no-resources` asks for the
rest alone (exit 0 or 1 as usual). On-prem blueprints create no cloud resources and never need it."""

from __future__ import annotations

import json
import sys
from collections import Counter

from ..findings import Finding, Severity, printed, report_json, report_text, summary_line, unique


def add_parser(sub) -> None:
    p = sub.add_parser("plan",
                       description="Validate and render a blueprint, size its fleets step by step, price them from "
                                   "the catalog's dated on-demand prices, run the Pulumi program under mocks (no "
                                   "Pulumi CLI or credentials needed) and report the resources it would create. A "
                                   "violated security policy is an error (exit 1).")
    p.add_argument("blueprint", metavar="BLUEPRINT", help="the blueprint YAML file")
    p.add_argument("--format", choices=("text", "markdown", "json"), default="text",
                   help="text for a terminal, markdown for a pull request comment, json for programs (default: text)")
    p.add_argument("-o", "--output", metavar="DIR", nargs="?", const="",
                   help="also write plan.json and plan.md into DIR (default: rendered/<metadata.name>)")
    p.add_argument("--no-resources", action="store_true", help=NO_RESOURCES_HELP)
    p.set_defaults(run=run)


AWS_EXTRA = "pip install 'fleetform[aws]'"
NO_RESOURCES_HELP = ("leave out the cloud resources and their security policies: sizing, cost and findings only "
                     f"(needs no Pulumi, that is no `{AWS_EXTRA}`)")


def missing_aws_extra() -> str | None:
    """Why the resource plan cannot be recorded here (the aws extra is not installed), or None."""
    from importlib.util import find_spec

    missing = [name for name in ("pulumi", "pulumi_aws") if find_spec(name) is None]
    if not missing:
        return None
    return (f"the cloud resource plan and its security policies need the aws extra ({' and '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not installed): {AWS_EXTRA}; or pass --no-resources for "
            "sizing, cost and findings alone")


def owners(resources: list[dict]) -> dict[str, str]:
    """Each resource's top-level component (a fleet's name, or network, storage, ...)."""
    parent = {r["name"]: r["parent"] for r in resources}
    owner = {}
    for r in resources:
        name = r["name"]
        while parent.get(name):
            name = parent[name]
        owner[r["name"]] = name
    return owner


def short_type(type_: str) -> str:
    return type_.split(":")[-1]


def build(path: str, resources: bool = True, display: str | None = None):
    """(validation result, plan data or None). Imports pulumi only when the blueprint is valid, on
    AWS, and the resources are asked for; data["resources"] is None when they were not recorded
    (left out, or the aws extra is missing: data["resources_not_recorded"] says which)."""
    from ..pipeline import check
    from ..policies import check as check_policies
    from ..render import render
    from ..sizing import as_dict

    result = check(path, display=display or path)
    if result.model is None:
        return result, None
    model, doc = result.model, result.document
    files = render(model)
    findings = list(result.findings)
    missing = None
    if model.cloud != "aws":
        recorded = []  # the Pulumi program creates nothing outside a cloud
    elif not resources:
        recorded, missing = None, "left out (--no-resources)"
    elif (missing := missing_aws_extra()) is not None:
        recorded = None
    else:
        from ..plan import record

        recorded = record(model, files)
    violations = []
    if recorded is not None:
        owner = owners(recorded)
        fleet_paths = {f.name: f.path for f in model.fleets}
        violations = check_policies(recorded, model)
        for pid, name, message in violations:
            findings.append(doc.finding(fleet_paths.get(owner.get(name), ()), f"{name}: {message}", pid))
    from ..diagram import graph, mermaid

    from ..pool import plan_dict

    data = {"blueprint": {"name": model.name, "version": model.version, "sha256": model.sha256},
            **as_dict(model), "resources": recorded, "diagram": mermaid(graph(model, recorded)),
            **({"pools": plan_dict(model)} if model.pools else {}),
            "findings": [f.to_dict() for f in sorted(findings, key=Finding.sort_key)]}
    if recorded is not None:
        from ..policies import POLICIES

        broken = {pid for pid, _, _ in violations} if model.cloud == "aws" else set()
        data["policies"] = {"checked": sorted(POLICIES) if model.cloud == "aws" else [],
                            "violated": sorted(broken)}
    if missing is not None:
        data["resources_not_recorded"] = missing
    return result, (data, files, findings)


def _money(value) -> str:
    return "not priced" if value is None else f"${value:,.2f}"


def _span(pair, show) -> str:
    """A range as one value where both ends are equal (`6`, `$27.45`), else `low-high` (`$55.04-$550.40`)."""
    low, high = (show(v) for v in pair)
    return low if low == high else f"{low}-{high}"


def text_lines(data: dict, markdown: bool) -> list[str]:
    lines: list[str] = []
    h = (lambda t: ["", f"#### {t}", ""]) if markdown else (lambda t: ["", t])
    bp = data["blueprint"]
    lines.append(f"### fleetform plan: {bp['name']} {bp['version']}" if markdown else f"{bp['name']} {bp['version']}")
    if markdown:  # the picture first: Mermaid, which GitHub renders in a comment
        from ..diagram import markdown as diagram_markdown

        lines += diagram_markdown(data.get("diagram"), "Diagram: networks, fleets, storage and schedulers")
    lines += h("Sizing")
    for index, fleet in enumerate(data["sizing"]):
        if markdown and index:
            lines.append("")  # a blank line ends the previous fleet's list
        lines.append(f"**{fleet['fleet']}** ({fleet['role']})" if markdown else f"  {fleet['fleet']} ({fleet['role']})")
        for step in fleet["steps"]:
            lines.append(f"- {step['what']}: {step['formula']} = **{step['result']}**" if markdown
                         else f"    {step['what']}: {step['formula']} = {step['result']}")
        for note in fleet["notes"]:
            lines.append(f"- _{note}_" if markdown else f"    note: {note}")
        if fleet.get("slo"):
            from ..slo import plan_lines as slo_lines

            lines += slo_lines(fleet["slo"], markdown, _table)
    cost = data["cost"]
    prices = cost.get("prices")
    lines += h(f"Cost ({cost['hours_per_month']} h a month; {prices})" if prices
               else "Cost (on-prem: owned hardware has no hourly price in fleetform's catalog)")
    rows = [(f["fleet"], f["instance_type"] or "-", _span(f["nodes"], str),
             _span(f["usd_per_hour"], _money), _span(f["usd_per_month"], _money)) for f in cost["fleets"]]
    if cost.get("priced_fleets", 1):  # no total of nothing: "$0.00" would read as free
        rows.append(("total (priced)", "", "", _span(cost["total_usd_per_hour"], _money),
                     _span(cost["total_usd_per_month"], _money)))
    header = ("fleet", "instance", "nodes", "$/h", "$/month")
    lines += _table(header, rows, markdown)
    lines += [f"- not priced: {u}" if markdown else f"  not priced: {u}" for u in cost["unpriced"]]
    if data.get("pools"):
        from ..pool import plan_lines

        lines += plan_lines(data["pools"], markdown, _table)
    if data["resources"] is None:
        return lines + h("Cloud resources: not recorded") + [
            f"- _{data['resources_not_recorded']}_" if markdown else f"  {data['resources_not_recorded']}"]
    policies = data.get("policies", {})
    if policies.get("checked"):  # "passed" and "not run" must not read alike
        checked, violated = policies["checked"], policies["violated"]
        line = (f"Security policies: {len(checked)} checked, {len(violated)} violated"
                + (f" ({', '.join(violated)}; see the findings)" if violated else f": {', '.join(checked)}"))
        lines += h(line)
    counts = Counter((owners(data["resources"])[r["name"]], short_type(r["type"]))
                     for r in data["resources"] if not r["type"].startswith("fleetform:"))
    lines += h(f"Cloud resources: {sum(counts.values())}" if counts else "Cloud resources: none (on-prem blueprint)")
    if counts:
        lines += _table(("component", "resource type", "count"),
                        [(g, t, str(n)) for (g, t), n in sorted(counts.items())], markdown)
    lines += _cluster_lines(data["resources"], markdown, h)
    return lines


def _cluster_lines(resources: list[dict], markdown: bool, h) -> list[str]:
    """The EKS node groups and the Helm releases, as recorded (the values are in plan.json)."""
    groups = [{**r["inputs"], "resource": r["name"]} for r in resources if r["type"] == "aws:eks/nodeGroup:NodeGroup"]
    releases = [r["inputs"] for r in resources if r["type"] == "kubernetes:helm.sh/v3:Release"]
    lines: list[str] = []
    if groups:
        lines += h("EKS node groups")
        lines += _table(("node group", "instance", "capacity", "nodes", "taints", "auto repair"), [
            (g["resource"], ",".join(g["instanceTypes"]), g["capacityType"],
             f"{g['scalingConfig']['minSize']}-{g['scalingConfig']['maxSize']}",
             ",".join(f"{t['key']}:{t['effect']}" for t in g.get("taints") or []) or "none",
             repair_text(g.get("nodeRepairConfig"))) for g in groups], markdown)
        if any((g.get("nodeRepairConfig") or {}).get("enabled") for g in groups):
            lines += ["", REPAIR_NOTE] if markdown else ["  " + REPAIR_NOTE]  # markdown: a blank line ends the table
    if releases:
        lines += h("Helm releases (values in plan.json)")
        lines += _table(("release", "chart", "namespace", "repository"), [
            (r["name"], f"{r['chart']} {r['version']}", r["namespace"],
             # an OCI chart is named by its full reference and has no repository (providers/aws/kube.py install)
             r["repositoryOpts"]["repo"] if "repositoryOpts" in r else "(OCI reference)") for r in releases],
            markdown)
    crds = [r for r in resources if r["type"] == CRD_TYPE]
    if crds:  # a gateway's vendored CRD bundles (providers/aws/gateway.py)
        lines += h("Custom resource definitions (applied before the releases; kept when removed)")
        lines += _table(("group", "bundle version", "kinds"), [
            (group, version, ", ".join(sorted(kinds))) for (group, version), kinds in sorted(_crd_groups(crds).items())],
            markdown)
    return lines


CRD_TYPE = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"


def _crd_groups(crds: list[dict]) -> dict[tuple[str, str], set[str]]:
    """(API group, the bundle version its CRDs are stamped with) -> kinds, from the recorded CRDs."""
    out: dict[tuple[str, str], set[str]] = {}
    for r in crds:
        spec, annotations = r["inputs"]["spec"], r["inputs"]["metadata"].get("annotations") or {}
        version = next((v for k, v in sorted(annotations.items()) if k.endswith("/bundle-version")), "?")
        out.setdefault((spec["group"], version), set()).add(spec["names"]["kind"])
    return out


REPAIR_NOTE = ("auto repair on: EKS reboots or replaces a node of the group 10 minutes after the node monitoring "
               "agent reports its GPUs unhealthy (AcceleratedHardwareReady false; DCGMError: no action), evicting its "
               "pods; a fleet's `health: {auto_repair: false}` turns it off (docs/health.md)")


def repair_text(config: dict | None) -> str:
    """EKS node auto repair of a node group as recorded (providers/aws/kube.py node_repair_config):
    `on, N at a time`, `off`, or `not set` where no config is sent (the system group, training groups)."""
    if not config:
        return "not set"
    if not config.get("enabled"):
        return "off"
    count = config.get("maxParallelNodesRepairedCount")
    return f"on, {count:g} at a time" if isinstance(count, (int, float)) else "on"


def _table(header, rows, markdown: bool) -> list[str]:
    if markdown:
        return ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"] + [
            "| " + " | ".join(r) + " |" for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    return ["  " + "  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=True)).rstrip() for row in [header, *rows]]


def run(args) -> int:
    from ..cli import UsageError

    try:
        result, built = build(args.blueprint, resources=not args.no_resources)
    except OSError as err:
        raise UsageError(f"cannot read {args.blueprint}: {err.strerror or err}") from None
    if built is None:  # --format json stays JSON: a CI step that parses the plan gets the findings as data
        sys.stdout.write((report_json if args.format == "json" else report_text)(result.findings, 1, result.waived))
        return 1
    data, _files, findings = built
    errors = any(f.severity is Severity.ERROR for f in findings)
    incomplete = data["resources"] is None and not args.no_resources
    if args.output is not None and not incomplete:  # no plan files that look whole but lack the resources
        from pathlib import Path

        from ..render.output import OutputError, write_into

        out = Path(args.output) if args.output else Path("rendered") / data["blueprint"]["name"]
        plan_files = {"plan.json": (json.dumps(data, indent=2, sort_keys=True) + "\n").encode(),
                      "plan.md": ("\n".join(_with_findings(text_lines(data, True), findings, True, result.waived))
                                 + "\n").encode()}
        try:
            write_into(plan_files, out)
        except OutputError as err:
            raise UsageError(str(err)) from None
    if args.format == "json":
        sys.stdout.write(json.dumps(data, indent=2, sort_keys=True) + "\n")
    else:
        markdown = args.format == "markdown"
        sys.stdout.write("\n".join(_with_findings(text_lines(data, markdown), findings, markdown, result.waived)) + "\n")
    if incomplete:
        sys.stdout.flush()
        raise UsageError(data["resources_not_recorded"])
    return 1 if errors else 0


def _with_findings(lines: list[str], findings: list, markdown: bool, waived: int = 0) -> list[str]:
    if findings:
        lines = lines + (["", "#### Findings", ""] if markdown else ["", "Findings"])
        shown, rest = printed(findings)
        lines += [(f"- `{f.to_text()}`" if markdown else f.to_text()) for f in shown] + ([rest] if rest else [])
    summary = summary_line(unique(findings), 1, waived)  # the line validate and render end with
    return lines + ["", summary] if markdown else lines + [summary]
