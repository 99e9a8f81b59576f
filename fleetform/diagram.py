"""The blueprint as a picture: a Mermaid flowchart (GitHub renders ```mermaid blocks in comments) of
the network, each fleet (one subgraph each), the storage and the schedulers, built from the resolved
model; for a diff, the union of both sides with what the change touches marked (added, removed,
replaced, updated) and the worst disruption class (fleetform/changes.py) in the label.

User text never reaches the diagram's syntax: node and subgraph ids are generated (n1, g1, ...), and
every label is quoted with any character that is not a letter, digit or a few plain punctuation marks
written as a Mermaid entity code (`#35;` for `#`; Mermaid's flowchart syntax, "Entity codes to escape
characters"), so quotes, brackets, backticks (a Markdown fence), `<` (HTML labels), newlines and
reserved words like `end` are text. Mermaid's own parser checks this (tests/test_diagram.py).
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field

MAX_TEXT = 50_000
"""Mermaid refuses to render a diagram longer than maxTextSize, 50,000 characters by default, and a
flowchart with more than maxEdges (500) edges (mermaid 11 config schema, packages/mermaid/src/schemas/
config.schema.yaml); plan and diff leave out a diagram past these and say why."""
MAX_EDGES = 500

MARKS = ("added", "removed", "replaced", "updated")
"""How a change touches a part: added or removed (only one side has it), replaced (a resource of it is
replaced: a new id), else updated (a resource of it changed, created or deleted, or its label changed)."""
STYLES = {"added": "fill:#e6ffec,stroke:#1a7f37,stroke-width:2px,color:#1f2328",
          "removed": "fill:#ffebe9,stroke:#cf222e,stroke-width:2px,stroke-dasharray:5 3,color:#1f2328",
          "replaced": "fill:#fff1e5,stroke:#bc4c00,stroke-width:3px,color:#1f2328",
          "updated": "fill:#ddf4ff,stroke:#0969da,stroke-width:2px,color:#1f2328"}
"""Each sets its text color as well as its fill: GitHub renders Mermaid with its dark theme for readers in dark
mode, whose label color is #ccc; on these light fills that is a contrast of about 1.4:1, the marked parts'
text unreadable (rendered with mermaid 11.17.2 in Chromium; ansible/team-devtools#44)."""
LEGEND = {"added": "added", "removed": "removed", "replaced": "replaced (new id)", "updated": "updated in place"}
_PLAIN = frozenset(" .,:/-_+=()@%~'·")
FABRICS = {"efa": "EFA", "infiniband": "InfiniBand", "roce": "RoCE", "tcp": "TCP"}
SHAPES = {"box": ('["', '"]'), "store": ('[("', '")]'), "round": ('("', '")')}


def text(value: object) -> str:
    """A label's text for a quoted Mermaid label: letters, digits and plain punctuation as they are,
    everything else (quotes, brackets, `#`, `;`, backticks, `<`, `&`, line breaks) as an entity code.
    Control, format and unassigned characters (bidirectional overrides among them) become U+FFFD."""
    out = []
    for char in str(value):
        if char in _PLAIN or (char.isalnum() and char.isprintable()):
            out.append(char)
        elif unicodedata.category(char).startswith("C") or char in "\u2028\u2029":
            out.append("#65533;")
        else:
            out.append(f"#{ord(char)};")
    # Mermaid's encodeEntities (mermaidAPI.ts) drops the last `;` of a line matching `style.*:\S*#.*;` or
    # `classDef.*:\S*#.*;` before it decodes entity codes, which would show `#35f00` for `#f00` after the
    # word `style` in a label: those words are written with an entity code for their first letter
    return "".join(out).replace("style", "#115;tyle").replace("classDef", "#99;lassDef")


def _label(*lines: object) -> str:
    return "<br/>".join(text(line) for line in lines if line not in (None, ""))


@dataclass
class Node:
    key: tuple
    lines: tuple
    shape: str = "box"
    group: tuple | None = None  # the key of the subgraph it is in


@dataclass
class Group:
    key: tuple
    title: str
    parent: tuple | None = None


@dataclass
class Graph:
    groups: dict[tuple, Group] = field(default_factory=dict)
    nodes: dict[tuple, Node] = field(default_factory=dict)
    edges: list[tuple[tuple, tuple, str, bool]] = field(default_factory=list)  # from, to, label, dotted

    def group(self, key: tuple, title: str, parent: tuple | None = None) -> tuple:
        self.groups[key] = Group(key, title, parent)
        return key

    def node(self, key: tuple, *lines: object, shape: str = "box", group: tuple | None = None) -> tuple:
        self.nodes[key] = Node(key, tuple(str(x) for x in lines if x not in (None, "")), shape, group)
        return key

    def edge(self, a: tuple, b: tuple, label: str = "", dotted: bool = False) -> None:
        self.edges.append((a, b, label, dotted))


def _count(size) -> str:
    return f"{size.min}" if size.min == size.max else f"{size.min}-{size.max}"


def _storage_lines(s) -> tuple:
    if s.type == "fsx-lustre":
        size = f"{s.capacity_gib:,} GiB" if s.capacity_gib is not None else ""
        speed = f"{s.throughput_mb_per_tib} MB/s per TiB" if s.throughput_mb_per_tib is not None else ""
        return (f"FSx for Lustre {s.name}", ", ".join(x for x in (size, speed) if x),
                f"mounted at {s.mount_path}" if s.mount_path else "")
    return (f"S3 bucket {s.name}", "versioned" if s.versioning else "not versioned")


def graph(bp, resources: list[dict] | None = None) -> Graph:
    """The parts of a blueprint as a graph keyed by what they are (fleet names, not ids), so two
    versions can be compared part by part. `resources`, the recorded plan, adds the subnets the
    Pulumi program makes (their CIDR blocks and zones); without it the network is the blueprint's."""
    g = Graph()
    if bp.cloud == "aws":
        net = g.group(("network",), f"AWS {bp.region} · " + (
            f"VPC {bp.network.cidr}" if bp.network.cidr else f"VPC {bp.network.vpc_id} (existing)"))
        subnets = [r for r in resources or () if r["type"] == "aws:ec2/subnet:Subnet"]
        for r in subnets:
            inputs = r["inputs"]
            g.node(("subnet", r["name"]), f"subnet {r['name'].removeprefix('network-')}",
                   f"{inputs.get('cidrBlock', '')} · {inputs.get('availabilityZone', '')}", group=net)
        if not subnets:
            g.node(("subnet", "nodes"), f"subnet {bp.network.subnet_id}" if bp.network.subnet_id else "nodes' subnet",
                   bp.availability_zone or "", group=net)
        ssh = ", ".join(bp.network.ssh_ingress_cidrs) or "none (SSM only)"
        g.node(("ssh",), f"SSH ingress: {ssh}", group=net)
    else:
        net = g.group(("network",), f"on-prem site {bp.site}" if bp.site else "on-prem")
    if bp.storage:
        store = g.group(("storage",), "storage")
        for s in bp.storage:
            g.node(("storage", s.name), *_storage_lines(s), shape="store", group=store)
    cluster = bp.cluster
    eks = None
    if cluster is not None:
        eks = g.group(("eks",), f"EKS cluster {cluster.name} · Kubernetes {cluster.version}")
        access = cluster.api_access_cidrs
        endpoint = ("public, from the deployer's address only" if access is None else
                    "private only" if not access else f"public from {', '.join(access)}")
        g.node(("eks", "control"), "EKS control plane", f"API endpoint: {endpoint}", group=eks)
        system = cluster.system
        g.node(("eks", "system"), f"node group {system.name}",
               f"{system.min if system.min == system.max else f'{system.min}-{system.max}'} x {system.instance_type}",
               group=eks)
        if cluster.releases:
            g.node(("eks", "addons"), "Helm: " + ", ".join(r.name for r in cluster.releases), group=eks)
        if bp.cloud == "aws":
            g.edge(eks, _nodes_subnet(g), dotted=True)
    for fleet in bp.fleets:
        _fleet(g, bp, fleet, eks)
    return g


def _fleet(g: Graph, bp, fleet, eks) -> None:
    name = fleet.name
    sched = fleet.scheduler
    kind = {"slurm": "Slurm", "kubernetes": "Kubernetes", "ray": "Ray", "slinky": "Slurm on EKS (Slinky)"}.get(
        getattr(sched, "type", ""), "no scheduler")
    parent = ("network",) if bp.cloud != "aws" else (
        ("eks",) if eks is not None and (kind in ("Ray", "Slurm on EKS (Slinky)")
                                         or kind == "Kubernetes" and not fleet.training) else None)
    fg = g.group(("fleet", name), f"{fleet.role} fleet {name} · {kind}", parent)
    gpus = (f"{fleet.shape.gpu_count} x {fleet.shape.gpu.name} per node" if fleet.shape is not None else "GPUs unknown")
    sharing = fleet.gpu_sharing
    if sharing.strategy != "none":
        gpus += f", {sharing.strategy}" + (f" {sharing.profile}" if sharing.profile else "") + (
            f" x {sharing.replicas}" if sharing.replicas else "")
    count = _count(fleet.nodes) if fleet.nodes is not None else "?"
    what = f"x {fleet.instance_type}" if fleet.instance_type else (f"nodes {fleet.hosts}" if fleet.hosts else "nodes")
    capacity = fleet.capacity_type + (f" {fleet.reservation_id}" if fleet.reservation_id else "")
    if fleet.training:
        fabric = FABRICS[fleet.interconnect.fabric] if fleet.interconnect is not None else ""
        nodes = g.node(("fleet", name, "nodes"), f"{count} {what}", gpus,
                       f"{fabric} · {capacity}" if bp.cloud == "aws" else fabric, group=fg)
        if fleet.placement != "none" and bp.cloud == "aws":
            g.node(("fleet", name, "placement"),
                   "placement: cluster (the Capacity Block's own)" if fleet.capacity_type == "capacity-block"
                   and fleet.placement == "cluster" else f"placement group: {fleet.placement}", group=fg)
            g.edge(("fleet", name, "placement"), nodes, dotted=True)
        if kind == "Slurm":
            ctl = sched.controller_instance_type or sched.controller_host or "controller"
            g.node(("fleet", name, "controller"), "Slurm controller" +
                   (f" ({sched.cluster_name})" if sched.cluster_name else ""), ctl,
                   "partitions: " + ", ".join(p.name for p in sched.partitions) if sched.partitions else "",
                   group=fg)
            g.edge(("fleet", name, "controller"), nodes, "schedules")
            if bp.cloud == "aws":
                g.node(("fleet", name, "state"), "state volume (EBS)", shape="store", group=fg)
                g.edge(("fleet", name, "controller"), ("fleet", name, "state"), dotted=True)
        for s in fleet.storage:
            if ("storage", s) in g.nodes:
                g.edge(nodes, ("storage", s), "mounts" if bp.storage_named(s).type == "fsx-lustre" else "reads, writes",
                       dotted=True)
        if bp.cloud == "aws":
            g.edge(fg, _nodes_subnet(g), dotted=True)
        return
    nodes = g.node(("fleet", name, "nodes"), (f"node group {fleet.cloud_name}" if eks is not None else "nodes"),
                   f"{count} {what}", gpus, capacity if bp.cloud == "aws" else "", group=fg)
    autoscaler = getattr(sched, "autoscaler", "none")
    for m in fleet.models:
        scale = ""
        if m.autoscale is not None and autoscaler != "none":
            scale = f"{autoscaler.upper()}: {m.autoscale.metric}, target {m.autoscale.target_per_replica:g} per replica"
            if autoscaler == "keda" and m.autoscale.kv_cache_target is not None:
                scale += f", KV cache {m.autoscale.kv_cache_target:g}"
            if autoscaler == "keda" and m.slo is not None and m.slo.ttft_p90_s is not None:
                scale += f", TTFT p90 {m.slo.ttft_p90_s:g} s"
        gpus = f"{m.gpus} GPU" + ("s" if m.gpus > 1 else "")
        key = g.node(("fleet", name, "model", m.name), f"model {m.name}", m.model,
                     f"{_count(m.replicas)} replicas x {gpus}", scale, shape="round", group=fg)
        g.edge(key, nodes, "runs on")


def _nodes_subnet(g: Graph) -> tuple:
    """The subnet the nodes are in: the recorded plan's `private` one, else the blueprint's."""
    return next((k for k in g.nodes if k[0] == "subnet" and k[1].endswith("-private")),
                next(k for k in g.nodes if k[0] == "subnet"))


# ---- a diff: which part each changed resource or rendered file belongs to ----------------------

_ACTION_MARK = {"create": "added", "delete": "removed", "replace": "replaced", "update": "updated"}


def part_of(bp, change_type: str, name: str, component: tuple[str, str]) -> tuple | None:
    """The diagram key of the part a recorded resource belongs to (by its component, from the plan's
    parents, and its type), or None for parts the diagram does not draw (IAM, the rendered artifact)."""
    kind, owner = component
    short = change_type.split(":")[-1]
    if kind == "Network":
        return ("subnet", name) if short == "Subnet" else ("network",)
    if kind == "Security":
        return ("network",)
    if kind == "Storage":
        names = sorted((s.name for s in bp.storage), key=len, reverse=True)
        rest = name.removeprefix(f"{owner}-")
        match = next((s for s in names if rest == s or rest.startswith(f"{s}-")), None)
        return ("storage", match) if match else ("storage",)
    if kind == "EksCluster":
        if short == "NodeGroup":
            return ("eks", "system")
        if short in ("Cluster", "Addon"):
            return ("eks", "control")
        if short == "Release":
            return ("eks", "addons")
        return ("eks",)
    fleet = next((f for f in bp.fleets if f.name == owner or f.cloud_name == owner), None)
    if fleet is None or kind not in ("TrainingFleet", "InferenceFleet", "KubeTrainingFleet"):
        return None
    base = ("fleet", fleet.name)
    if kind == "TrainingFleet":
        if short in ("Instance", "NetworkInterface"):
            return base + ("controller",)
        if short in ("Volume", "VolumeAttachment"):
            return base + ("state",)
        if short == "PlacementGroup":
            return base + ("placement",)
        if short in ("LaunchTemplate", "Command"):
            return base + ("nodes",)
        return base
    if short in ("NodeGroup", "LaunchTemplate"):
        return base + ("nodes",)
    if short == "PlacementGroup":  # KubeTrainingFleet
        return base + ("placement",)
    model = next((m.name for m in sorted(fleet.models, key=lambda m: len(m.name), reverse=True)
                  if name.endswith(f"-{m.name}")), None)
    return base + ("model", model) if model else base


def file_part(bp, path: str) -> tuple | None:
    """The part a changed rendered file belongs to: a fleet's controller (Slurm files), its nodes
    (nccl.env, the node programs and fleet.json) or a model (its Deployment); else the fleet."""
    parts = path.split("/")
    fleet = next((f for f in bp.fleets if f.name == parts[0]), None)
    if fleet is None:
        return None
    base = ("fleet", fleet.name)
    if parts[1:] == ["nccl.env"] or parts[1:3] == ["slurm", "bin"]:
        return base + ("nodes",)
    if parts[1:2] == ["slurm"]:
        return base + ("controller",)
    model = next((m.name for m in sorted(fleet.models, key=lambda m: len(m.name), reverse=True)
                  if parts[-1].endswith(f"-{m.name}-deployment.yaml")
                  or any(parts[-1] == f"{m.name}-{kind}.yaml" for kind in MODEL_FILES)), None)
    return base + ("model", model) if model else base


MODEL_FILES = ("deployment", "service", "pdb", "servicemonitor", "serviceaccount", "scaledobject", "hpa")
"""The Kubernetes files fleetform/render/k8s.py writes for each model, `<model>-<kind>.yaml`: a change to one
(a KEDA target, a PodDisruptionBudget) touches that model, not its whole fleet."""


@dataclass
class Mark:
    mark: str
    worst: str = "none"  # the worst disruption class of the changes to this part


def merge(old: Graph, new: Graph, touched: dict[tuple, list[tuple[str, str]]],
          renames: dict[str, str] | None = None) -> tuple[Graph, dict[tuple, Mark]]:
    """The union of both sides' graphs (the old side's fleet names through `renames`), and the mark
    of each part: only on the old side removed, only on the new added, else the strongest action
    of the changes touching it (`touched`: key -> [(action mark, disruption class)]), or updated
    where its label changed."""
    from .changes import CLASSES

    renames = renames or {}

    def rename(key: tuple) -> tuple:
        if len(key) >= 2 and key[0] == "fleet":
            return ("fleet", renames.get(key[1], key[1])) + key[2:]
        return key

    old_groups = {rename(k): Group(rename(k), v.title, v.parent and rename(v.parent)) for k, v in old.groups.items()}
    old_nodes = {rename(k): Node(rename(k), v.lines, v.shape, v.group and rename(v.group))
                 for k, v in old.nodes.items()}
    out = Graph(dict(new.groups), dict(new.nodes), list(new.edges))
    marks: dict[tuple, Mark] = {}
    for key, grp in old_groups.items():
        if key not in out.groups:
            out.groups[key] = grp
            marks[key] = Mark("removed")
    for key, node in old_nodes.items():
        if key not in out.nodes:
            out.nodes[key] = node
            marks[key] = Mark("removed")
    seen = set(out.edges)
    for a, b, label, dotted in old.edges:
        edge = (rename(a), rename(b), label, dotted)
        if edge not in seen:
            out.edges.append(edge)
            seen.add(edge)
    for key in list(new.groups) + list(new.nodes):
        if key not in old_groups and key not in old_nodes:
            marks[key] = Mark("added")
    for key, items in touched.items():
        if key not in out.nodes and key not in out.groups:
            continue
        worst = max((cls for _, cls in items), key=CLASSES.index, default="none")
        current = marks.get(key)
        if current is not None:  # the part itself is added or removed: so it stays marked
            current.worst = max((current.worst, worst), key=CLASSES.index)
            continue
        # on both sides: a resource of it created or deleted (a Service, an add-on) updates the part
        marks[key] = Mark("replaced" if any(m == "replaced" for m, _ in items) else "updated", worst)
    for key, node in new.nodes.items():
        if key in old_nodes and key not in marks and old_nodes[key].lines != node.lines:
            marks[key] = Mark("updated")
    return out, marks


def touched_parts(old_bp, new_bp, changes, disruptions, components, files) -> dict[tuple, list[tuple[str, str]]]:
    """key -> [(mark, disruption class)] of every resource change (with its disruption, in the same
    order) and changed rendered file ({path, change} with its class, or "in place")."""
    from .changes import file_disruption, ray_fleets, slinky_fleets

    out: dict[tuple, list[tuple[str, str]]] = {}
    for change, disruption in zip(changes, disruptions, strict=False):
        side = old_bp if change.action == "delete" else new_bp
        key = part_of(side, change.type, change.name, components.get(change.name, ("", "")))
        if key is not None:
            out.setdefault(key, []).append((_ACTION_MARK[change.action], disruption.cls))
    ray, slinky = ray_fleets(old_bp, new_bp), slinky_fleets(old_bp, new_bp)
    for item, old, new in files:
        side = old_bp if item["change"] == "-" else new_bp
        key = file_part(side, item["path"])
        if key is None:
            continue
        found = file_disruption(item["path"], item["change"], old, new, ray, slinky)
        out.setdefault(key, []).append(("updated", found.cls if found is not None else "in place"))
    return out


# ---- Mermaid source ------------------------------------------------------------------------------

def mermaid(g: Graph, marks: dict[tuple, Mark] | None = None) -> str:
    """The graph as a Mermaid flowchart: subgraphs nested as the groups are, nodes in their groups,
    then the edges, the marks' classes and (when anything is marked) a legend of the marks used."""
    marks = marks or {}
    ids: dict[tuple, str] = {}
    for i, key in enumerate(g.groups, 1):
        ids[key] = f"g{i}"
    for i, key in enumerate(g.nodes, 1):
        ids[key] = f"n{i}"
    lines = ["flowchart LR"]
    children: dict[tuple | None, list[tuple]] = {}
    for key, grp in g.groups.items():
        children.setdefault(grp.parent if grp.parent in g.groups else None, []).append(key)
    members: dict[tuple | None, list[tuple]] = {}
    for key, node in g.nodes.items():
        members.setdefault(node.group if node.group in g.groups else None, []).append(key)

    def node_line(key: tuple, indent: str) -> str:
        node = g.nodes[key]
        body = list(node.lines)
        mark = marks.get(key)
        if mark is not None and mark.mark != "added" and mark.worst not in ("none", "in place"):
            body.append(f"{mark.mark}: {mark.worst}")
        opening, closing = SHAPES[node.shape]
        return f"{indent}{ids[key]}{opening}{_label(*body)}{closing}"

    def emit(parent: tuple | None, depth: int) -> None:
        indent = "  " * depth
        for key in members.get(parent, []):
            lines.append(node_line(key, indent))
        for key in children.get(parent, []):
            lines.append(f'{indent}subgraph {ids[key]}["{_label(g.groups[key].title)}"]')
            emit(key, depth + 1)
            lines.append(f"{indent}end")

    emit(None, 1)
    for a, b, label, dotted in g.edges:
        if a not in ids or b not in ids:
            continue
        arrow = "-.->" if dotted else "-->"
        lines.append(f'  {ids[a]} {arrow}|"{text(label)}"| {ids[b]}' if label else f"  {ids[a]} {arrow} {ids[b]}")
    used = [m for m in MARKS if any(mark.mark == m for mark in marks.values())]
    if used:
        lines.append('  subgraph legend["legend"]')
        for i, m in enumerate(used, 1):
            lines.append(f'    l{i}["{text(LEGEND[m])}"]')
        lines.append("  end")
        for m in used:
            lines.append(f"  classDef {m} {STYLES[m]}")
        for m in used:
            keys = [ids[k] for k, mark in marks.items() if mark.mark == m and k in ids]
            lines.append(f"  class {','.join(keys + [f'l{used.index(m) + 1}'])} {m}")
    return "\n".join(lines) + "\n"


def too_big(source: str) -> str | None:
    """Why a renderer would refuse the diagram (Mermaid's own limits), or None."""
    edges = sum(1 for line in source.splitlines() if "-->" in line or "-.->" in line)
    if len(source) > MAX_TEXT:
        return f"the diagram has {len(source):,} characters, more than Mermaid renders ({MAX_TEXT:,})"
    if edges > MAX_EDGES:
        return f"the diagram has {edges:,} edges, more than Mermaid renders ({MAX_EDGES})"
    return None


def markdown(source: str | None, title: str) -> list[str]:
    """A heading and the ```mermaid block, never folded: GitHub draws a flowchart with labelled links inside a
    closed <details> with "Cannot read properties of undefined (reading 'x')" (mermaid-js/mermaid#3504, open),
    and every diagram here has labelled links. A diagram past Mermaid's limits is named, not shown."""
    if source is None:
        return []
    lines = ["", f"#### {title}", ""]
    why = too_big(source)
    if why:
        return lines + [f"_Not shown: {why}; `--format json` has its source (`diagram`)._"]
    return lines + ["```mermaid", source.rstrip("\n"), "```"]
