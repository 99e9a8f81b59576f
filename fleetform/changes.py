"""What a change of a blueprint does to its cloud resources, as `pulumi preview` would show it:
each resource created, deleted, updated in place or replaced, from which input, and what that
means for running nodes and stored data.

Input: two recorded plans (fleetform/plan.py: type, name, parent, inputs, the resources each input
was computed from, resource options). Which inputs force a replacement is data,
providers/aws/replacements.json, taken from the AWS provider's schema with its source per type.
A replaced resource gets a new id, so every input that reads it changes too: replacements cascade
along the recorded dependency edges (a new subnet replaces the NAT gateway and the file system in
it, as AWS would).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources as importlib_resources
from typing import Any

CREATE, DELETE, UPDATE, REPLACE = "create", "delete", "update", "replace"
SIGNS = {CREATE: "+", DELETE: "-", UPDATE: "~", REPLACE: "-/+"}
_UNSET = object()


UNVERSIONED = {"tags", "tagsAll"}
"""Inputs whose update leaves `changes_on_update` outputs alone: terraform-provider-aws makes a new
launch template version only when launch template data changes (resourceLaunchTemplateUpdate's
updateKeys; `tags` is not one), so a tags-only update rolls no node."""


@lru_cache(maxsize=1)
def replacement_data() -> dict[str, dict]:
    """Per Pulumi resource type: replace_on, rolls_nodes_on, restarts_on, changes_on_update,
    loses_data, source."""
    text = importlib_resources.files("fleetform.providers.aws").joinpath("replacements.json").read_text()
    return json.loads(text)["types"]


@dataclass(frozen=True)
class InputChange:
    path: str
    old: Any
    new: Any
    forces_replacement: bool
    via: str | None = None  # the replaced or updated resource this input is computed from

    def to_dict(self) -> dict:
        data = {"path": self.path, "old": self.old, "new": self.new, "forces_replacement": self.forces_replacement}
        if self.via:
            data["via"] = self.via
        return data


@dataclass
class Change:
    action: str
    type: str
    name: str
    old_name: str | None = None
    inputs: list[InputChange] = field(default_factory=list)
    effects: list[str] = field(default_factory=list)
    known: bool = True  # False: the type has no replacement data (treated as an update)
    recreate: bool = False  # a Deployment whose strategy is Recreate (its old pods stop before new ones start)

    @property
    def short_type(self) -> str:
        return self.type.split(":")[-1]

    def to_dict(self) -> dict:
        data = {"action": self.action, "type": self.type, "name": self.name,
                "inputs": [i.to_dict() for i in self.inputs], "effects": self.effects}
        if self.old_name and self.old_name != self.name:
            data["old_name"] = self.old_name
        if not self.known:
            data["replacement_data"] = "missing"
        return data


def _leaf_changes(old: Any, new: Any, prefix: str) -> list[tuple[str, Any, Any]]:
    """(path, old, new) of every differing value; mappings are walked, lists compared whole."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = []
        for key in sorted(set(old) | set(new)):
            a, b = old.get(key, _UNSET), new.get(key, _UNSET)
            if a != b:
                out += _leaf_changes(a, b, f"{prefix}.{key}" if prefix else key)
        return out
    return [(prefix, None if old is _UNSET else old, None if new is _UNSET else new)]


def _forces(path: str, replace_on: list[str]) -> bool:
    return any(path == r or path.startswith(r + ".") or r.startswith(path + ".") for r in replace_on)


def _renamed(new: dict[str, dict], old_names: set[str]) -> dict[str, str]:
    """new logical name -> old logical name, for components kept by an alias (`renamed_from`) and
    the children named after them."""
    mapping: dict[str, str] = {}
    for name, res in new.items():
        for alias in res.get("aliases", []):
            if alias in old_names and name not in old_names:
                mapping[name] = alias
    for name, res in new.items():
        if name in mapping or name in old_names:
            continue
        parent = res.get("parent")
        while parent is not None:
            if parent in mapping and name.startswith(parent + "-"):
                candidate = mapping[parent] + name[len(parent):]
                if candidate in old_names:
                    mapping[name] = candidate
                break
            parent = new.get(parent, {}).get("parent")
    return mapping


def _as_renamed(value: Any, pairs: dict[str, str]) -> Any:
    """The old side's inputs as the renamed resources' ids read: under the mocks a resource's id,
    ARN and name are made from its logical name (fleetform/plan.py), while on AWS a resource kept by
    an alias keeps its physical id. So `train-controller-id` of the old plan is the same instance as
    `pretrain-controller-id` of the new one."""
    if isinstance(value, dict):
        return {k: _as_renamed(v, pairs) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_renamed(v, pairs) for v in value]
    if not isinstance(value, str) or not pairs:
        return value
    from .plan import MOCK_ARN, mock_short

    arn = re.escape(MOCK_ARN.format(kind="KIND", short="SHORT")).replace("KIND", "([a-z0-9]+)")
    for old, new in pairs.items():
        short_old, short_new = mock_short(old), mock_short(new)
        if value in (short_old, f"{short_old}-id", f"{short_old}-bucket"):
            return short_new + value[len(short_old):]
        pattern = arn.replace("SHORT", re.escape(short_old)) + "(?![A-Za-z0-9-])"
        value = re.sub(pattern, lambda m, short_new=short_new: MOCK_ARN.format(kind=m.group(1), short=short_new),
                       value)
    return value


def _key(res: dict) -> str:
    """A resource's identity in a plan: logical names repeat across types (a role and an instance
    both called train-controller), type and name together do not."""
    return f"{res['type']}::{res['name']}"


def _dependency_order(resources: dict[str, dict]) -> list[str]:
    order, seen = [], set()

    def visit(key: str, stack: set[str]) -> None:
        if key in seen or key in stack or key not in resources:
            return
        stack.add(key)
        for deps in resources[key].get("deps", {}).values():
            for dep in deps:
                visit(dep, stack)
        stack.discard(key)
        seen.add(key)
        order.append(key)

    for key in sorted(resources):
        visit(key, set())
    return order


def _describe_nodes(res: dict) -> str:
    inputs = res["inputs"]
    scaling = inputs.get("scalingConfig", {})
    types = ", ".join(inputs.get("instanceTypes", [])) or "?"
    low, high = scaling.get("minSize"), scaling.get("maxSize")
    count = f"{low}" if low == high else f"{low}-{high}"
    return f"{count} x {types}"


def repair_turn(change: Change) -> bool | None:
    """True where an update turns EKS node auto repair on for a node group (from no config or
    `enabled: false`), False where it turns it off, None otherwise. A node group recorded by a
    fleetform without the switch has no nodeRepairConfig: upgrading turns repair on, and says so."""
    if change.short_type != "NodeGroup" or change.action != UPDATE:
        return None
    for item in change.inputs:
        if item.path == "nodeRepairConfig":
            was = bool((item.old or {}).get("enabled")) if isinstance(item.old, dict) else False
            now = bool((item.new or {}).get("enabled")) if isinstance(item.new, dict) else False
        elif item.path == "nodeRepairConfig.enabled":
            was, now = bool(item.old), bool(item.new)
        else:
            continue
        if was != now:
            return now
    return None


REPAIR_ON = ("turns on EKS node auto repair on node group {name}: from now on EKS reboots or replaces a node of it "
             "by itself (its pods evicted) 10 minutes after the node monitoring agent reports its GPUs unhealthy, "
             "one node at a time; `health: {{auto_repair: false}}` on the fleet keeps it off")


def _effects(change: Change, old: dict | None, new: dict | None, data: dict) -> list[str]:
    effects = []
    res = new or old
    kind = change.short_type
    if change.action in (REPLACE, DELETE) and data.get("loses_data"):
        effects.append(f"{'replaces' if change.action == REPLACE else 'deletes'} {kind} {change.name}: "
                       "the data stored on it is lost")
    if kind == "NodeGroup":
        if repair_turn(change):
            effects.append(REPAIR_ON.format(name=change.name))
        if change.action == REPLACE:
            effects.append(f"replaces all nodes of node group {change.name} ({_describe_nodes(res)})")
        elif change.action == UPDATE and any(_forces(i.path, data.get("rolls_nodes_on", [])) for i in change.inputs):
            effects.append(f"rolls the nodes of node group {change.name}: EKS replaces each running node "
                           f"({_describe_nodes(res)})")
        elif change.action == DELETE:
            effects.append(f"deletes the nodes of node group {change.name} ({_describe_nodes(res)})")
        raised = next((i for i in change.inputs if i.path == "scalingConfig.minSize"
                       and isinstance(i.old, (int, float)) and isinstance(i.new, (int, float)) and i.new > i.old), None)
        if (change.action == UPDATE and raised is not None
                and "scalingConfig.desiredSize" in (new or {}).get("options", {}).get("ignoreChanges", [])):
            # pulumi up keeps the running desired size (the Cluster Autoscaler's), and EKS refuses a minimum
            # above it: "Minimum capacity N can't be greater than desired size M" (UpdateNodegroupConfig;
            # terraform-aws-modules/terraform-aws-eks #944, #2030, #3306 hit the same with ignore_changes)
            effects.append(f"raises the minimum of node group {change.name} to {raised.new}: `pulumi up` keeps the "
                           "running desired size, and EKS refuses a minimum above it; first run `aws eks "
                           f"update-nodegroup-config --scaling-config desiredSize={raised.new}` on that node group "
                           "if it runs fewer nodes")
    if change.action == DELETE and (old or {}).get("options", {}).get("retainOnDelete"):
        # pulumi up forgets it and leaves it in place (providers/aws/gateway.py: a CRD's deletion deletes every
        # object of its kind in the cluster)
        # and a later `pulumi up` that declares it again creates it: pulumi-kubernetes 4.29+ sends a plain create,
        # which the API server refuses for an existing object (its CHANGELOG, 4.29.0, #2926), unless the provider's
        # upsertExistingObjects (read from PULUMI_K8S_UPSERT_EXISTING_OBJECTS) adopts it
        effects.append(f"leaves {kind} {change.name} in the cluster (retain_on_delete): `pulumi up` only stops "
                       "managing it; declaring it again later fails on AlreadyExists unless that `pulumi up` runs "
                       "with PULUMI_K8S_UPSERT_EXISTING_OBJECTS=true, which adopts the object left in the cluster")
    if kind == "Instance":
        itype = res["inputs"].get("instanceType", "?")
        if change.action == REPLACE:
            effects.append(f"replaces instance {change.name} ({itype})")
        elif change.action == UPDATE and any(_forces(i.path, data.get("restarts_on", [])) for i in change.inputs):
            effects.append(f"stops and starts instance {change.name} ({itype})")
    return effects


def compare(old_resources: list[dict], new_resources: list[dict],
            regions: tuple[str | None, str | None] = (None, None)) -> list[Change]:
    """The changes from one recorded plan to another, in a stable order. `regions` (old, new): a
    region the blueprint moves to replaces every regional resource (the provider's region is not an
    input the mocks record, so it is added here as the input `(region)` of each)."""
    moved = regions[0] != regions[1]
    table = replacement_data()
    old = {_key(r): r for r in old_resources if not r["type"].startswith("fleetform:")}
    new = {_key(r): r for r in new_resources if not r["type"].startswith("fleetform:")}
    renamed = _renamed({r["name"]: r for r in new_resources}, {r["name"] for r in old_resources})
    changes: dict[str, Change] = {}
    matched: dict[str, str] = {}  # new key -> old key
    for key, res in new.items():
        candidates = [key, f"{res['type']}::{renamed[res['name']]}" if res["name"] in renamed else None]
        found = next((c for c in candidates if c in old), None)
        if found is not None:
            matched[key] = found
    pairs = {old[o]["name"]: new[n]["name"] for n, o in matched.items() if old[o]["name"] != new[n]["name"]}
    for key in _dependency_order(new):
        res = new[key]
        name = res["name"]
        if key not in matched:
            changes[key] = Change(CREATE, res["type"], name)
            continue
        before = old[matched[key]]
        data = table.get(res["type"])
        replace_on = list((data or {}).get("replace_on", [])) + res.get("options", {}).get("replaceOnChanges", [])
        ignored = res.get("options", {}).get("ignoreChanges", [])
        inputs = [InputChange(path, a, b, _forces(path, replace_on))
                  for path, a, b in _leaf_changes(_as_renamed(before["inputs"], pairs), res["inputs"], "")
                  if not any(path == i or path.startswith(i + ".") for i in ignored)]
        if moved and not res["type"].startswith(GLOBAL_TYPES + ("pulumi:",)):
            inputs.append(InputChange("(region)", regions[0], regions[1], True))
        changed_paths = {i.path for i in inputs}
        for input_key, deps in sorted(res.get("deps", {}).items()):
            for dep in deps:
                upstream = changes.get(dep)
                if upstream is None:
                    continue
                if upstream.action in (REPLACE, CREATE):  # a new id
                    if input_key not in changed_paths and input_key not in ignored:
                        inputs.append(InputChange(input_key, before["inputs"].get(input_key),
                                                  "(known after the replacement)", _forces(input_key, replace_on),
                                                  via=upstream.name))
                        changed_paths.add(input_key)
                elif (upstream.action == UPDATE and table.get(upstream.type, {}).get("changes_on_update")
                      and any(i.path.split(".")[0] not in UNVERSIONED for i in upstream.inputs)):
                    # an in-place update changes the upstream's version output (a launch template's
                    # latestVersion): only a reference that carries a version reads it; its id and
                    # ARN stay as they are
                    value = res["inputs"].get(input_key)
                    path = f"{input_key}.version"
                    if isinstance(value, dict) and "version" in value and path not in changed_paths:
                        inputs.append(InputChange(path, value["version"], "(the new version)",
                                                  _forces(path, replace_on), via=upstream.name))
                        changed_paths.add(path)
        if not inputs:
            continue
        action = REPLACE if any(i.forces_replacement for i in inputs) else UPDATE
        strategy = ((res["inputs"].get("spec") or {}).get("strategy") or {}).get("type")
        change = Change(action, res["type"], name, before["name"], sorted(inputs, key=lambda i: i.path),
                        known=data is not None, recreate=strategy == "Recreate")
        change.effects = _effects(change, before, res, data or {})
        changes[key] = change
    kept = set(matched.values())
    for key, res in old.items():
        if key not in kept:
            change = Change(DELETE, res["type"], res["name"])
            change.effects = _effects(change, res, None, table.get(res["type"], {}))
            changes[key] = change
    order = {CREATE: 2, DELETE: 1, REPLACE: 0, UPDATE: 3}
    return sorted(changes.values(), key=lambda c: (order[c.action], c.short_type, c.name))


def show_value(value: Any, limit: int = 72) -> str:
    """A value as a reviewer reads it: JSON; a long value by its size and the start of its sha256, so
    two versions of a script or a policy are told apart without printing them."""
    if isinstance(value, str) and value.startswith("(") and value.endswith(")"):
        return value
    text = json.dumps(value, sort_keys=True)
    if len(text) <= limit:
        return text
    import hashlib

    what = f"{len(value):,} characters" if isinstance(value, str) else f"{len(text):,} characters of JSON"
    return f"<{what}, sha256 {hashlib.sha256(text.encode()).hexdigest()[:12]}>"


# ---- disruption: what each change does to running machines and stored data, and when ----------

CLASSES = ("none", "in place", "next job", "rolling", "node roll", "drain", "replace with state", "data loss")
"""Disruption classes, from least to most disruptive (docs/update-safety.md has the table of which
change falls in which class). "next job" is the day-2 contract's class of files that tasks read
(nccl.env): each node installs the new file before its next job, a running job keeps its own."""

GLOBAL_TYPES = ("aws:iam/",)
"""IAM is global: a region move keeps its roles and policies; every other AWS resource is regional."""

EKS_SURGE_SOURCE = "https://docs.aws.amazon.com/eks/latest/userguide/managed-node-update-behavior.html"
"""EKS's managed node update launches new nodes first: it raises the Auto Scaling group's maximum and
desired size by the larger of up to twice the number of Availability Zones or maxUnavailable
(default 1), then drains and terminates the old nodes."""

STATEFUL_PARTS = {"aws:ec2/instance:Instance": "controller", "aws:ebs/volume:Volume": "state-volume",
                  "aws:ec2/volume:Volume": "state-volume",
                  "aws:fsx/lustreFileSystem:LustreFileSystem": "file-system", "aws:s3/bucket:Bucket": "bucket"}
"""The parts whose replacement needs `update_safety.allow_replace` in the blueprint: the Slurm
controller (its instance and its state volume) of a training fleet, and storage's file systems and
buckets. Which component a resource belongs to comes from the recorded plan's parents."""


GENERIC = ("created; nothing running changes", "tags only: updated in place, nothing running notices",
           "replaced with a new id; nothing is stored on it", "deleted; nothing is stored on it",
           "updated in place; nothing running restarts")
"""What most resource changes do: nothing a running machine notices. Text and markdown count these
instead of listing each (the resource list names them; JSON has every one)."""


TRAINING_ROLL_INPUTS = {"instanceType", "imageId", "networkInterfaces", "placement", "blockDeviceMappings",
                        "instanceMarketOptions", "capacityReservationSpecification", "metadataOptions",
                        "iamInstanceProfile"}
"""Launch template inputs of a Slurm training fleet whose change rolls its nodes (the day-2 contract:
instance type, image, EFA/launch-template layout, placement: each node is drained once idle and
launched again from the new version). Others (user data, tags) reach a node when it is next launched."""


MIG_CONFIG_INPUT = "labels.nvidia.com/mig.config"
MIG_RELABEL = (
    "EKS relabels every running node of the group at once (nvidia.com/mig.config), and each node's GPU Operator MIG "
    "manager repartitions its GPUs without draining the node or honouring PodDisruptionBudgets: it pauses the "
    "device plugin and DCGM exporter, and a GPU whose MIG mode changes while a pod uses it cannot be reset, so with "
    "WITH_REBOOT the node reboots, ending every model replica and training job on it; scale the fleet's models and "
    "jobs off the nodes first, or move the layout to a new node group")
"""A changed MIG layout: EKS applies a node group's label update to its running nodes (UpdateNodegroupConfig: "the
Kubernetes labels to apply to the nodes in the node group after the update"); the MIG manager acts on a node whose
nvidia.com/mig.config label changed (NVIDIA/mig-parted cmd/nvidia-mig-manager/main.go), and its reconfigure
(pkg/mig/reconfigure/reconfigure.go) stops only the GPU Operator's own pods, then on a failed mode change reboots the
node when WITH_REBOOT is set (fleetform/cluster.py sets it for MIG fleets)."""


@dataclass
class Disruption:
    cls: str
    what: str  # the part: a resource, a rendered file, a fleet or a model
    how: str  # what running machines (or stored data) do, and when
    part: str | None = None  # the waiver's name of a stateful part replaced: `train/controller`, `storage/scratch`
    waived: bool = False

    def to_dict(self) -> dict:
        data = {"class": self.cls, "what": self.what, "how": self.how}
        if self.part:
            data.update(part=self.part, waived=self.waived)
        return data


def _components(resources: list[dict]) -> dict[str, tuple[str, str]]:
    """resource name -> (component type's last word, component name), from the parents recorded."""
    by_name = {r["name"]: r for r in resources}
    out = {}
    for r in resources:
        name, seen = r["name"], set()
        while by_name.get(name, {}).get("parent") and name not in seen:
            seen.add(name)
            name = by_name[name]["parent"]
        top = by_name.get(name, {})
        out[r["name"]] = (top.get("type", "").split(":")[-1], top.get("name", name))
    return out


def _part(change: Change, component: tuple[str, str]) -> str | None:
    kind = STATEFUL_PARTS.get(change.type)
    if kind is None:
        return None
    owner_type, owner = component
    if kind in ("controller", "state-volume") and owner_type == "TrainingFleet":
        return f"{owner}/{kind}"
    if kind in ("file-system", "bucket") and owner_type == "Storage":
        prefix = f"{owner}-"
        return f"storage/{change.name[len(prefix):] if change.name.startswith(prefix) else change.name}"
    return None


def _tags_only(change: Change) -> bool:
    """Only tags change: of the resource, or (a launch template's tagSpecifications) of the instances
    it launches from now on; running instances keep theirs and nothing restarts."""
    tags = UNVERSIONED | ({"tagSpecifications"} if change.short_type == "LaunchTemplate" else set())
    return bool(change.inputs) and all(i.path.split(".")[0] in tags for i in change.inputs)


CLAIM_REQUEST = "spec.resources.requests.storage"


def claim_resize(old, new) -> str:
    """What the API server does with a bound claim's new request (a shared cache's size, fleetform/k8s.py: its
    default grows with each model): the PersistentVolumeClaimResize admission plugin refuses a larger request unless
    the claim's StorageClass has allowVolumeExpansion: true ("only dynamically provisioned pvc can be resized and the
    storageclass that provisions the pvc must support resize"), and validation refuses a smaller one always
    (ValidatePersistentVolumeClaimUpdate: "field can not be less than previous value"). fleetform's EFS class sets no
    allowVolumeExpansion (providers/aws/caches.py): `pulumi up` fails on the claim either way."""
    from .cluster import quantity

    try:
        smaller = quantity(new) < quantity(old)
    except (TypeError, ValueError):
        smaller = False
    why = ("the API server refuses a smaller request of a bound claim" if smaller else
           "the API server refuses it unless the claim's StorageClass has allowVolumeExpansion: true (fleetform's "
           "EFS class does not; EFS ignores the request anyway)")
    return (f"its request goes from {old} to {new}: {why}, so `pulumi up` fails on it; keep "
            f"the old size (cache.size_gib: {str(old).removesuffix('Gi')}) or delete the claim first (its cache is "
            "then filled again)")


PROXY_STOP = ("each old pod leaves its Service, serves 10 s more (kgateway's gracefulShutdown) and stops, ending the "
              "requests still streaming through it")
PROXY_ROLL = ("its listeners' ports changed: kgateway rolls the gateway's proxy pods (each listener port is a port "
              "of the proxy's Envoy container and Service); " + PROXY_STOP)
PROXY_TEMPLATE = ("the proxy's pod template changed: kgateway renders the proxy's Deployment from these parameters "
                  "and Kubernetes rolls its pods one by one; " + PROXY_STOP)
PROXY_FEWER = ("fewer proxy replicas: kgateway scales the proxy's Deployment down; " + PROXY_STOP.replace("each old",
                                                                                                        "each removed"))
PROXY_MORE = "more proxy replicas: kgateway scales the proxy's Deployment up; each new pod joins its Service once ready"
PROXY_POD_PATHS = ("spec.kube.podTemplate", "spec.kube.envoyContainer", "spec.kube.sdsContainer")
"""GatewayParameters fields kgateway v2.1's deployer writes into the proxy's pod template (pkg/deployer/values_helpers.go,
helm proxy-deployment.yaml); the Service's fields (spec.kube.service) change no pod."""


def _listener_ports(listeners) -> frozenset | None:
    """The ports of a Gateway's `spec.listeners` as a recorded input holds them (a list, or its JSON); None if it
    holds something else, so an unreadable side counts as changed."""
    if isinstance(listeners, str):
        try:
            listeners = json.loads(listeners)
        except ValueError:
            return None
    if not isinstance(listeners, list):
        return None
    return frozenset(item.get("port") for item in listeners if isinstance(item, dict))


def classify(change: Change, component: tuple[str, str]) -> Disruption:
    """The disruption of one resource change, from its type, action, inputs and component."""
    data = replacement_data().get(change.type, {})
    kind, what = change.short_type, f"{change.short_type} {change.name}"
    part = _part(change, component)
    gone = change.action in (REPLACE, DELETE)
    if change.action == CREATE:
        return Disruption("none", what, GENERIC[0])
    if change.action == UPDATE and _tags_only(change):
        return Disruption("none", what, GENERIC[1])
    if gone and data.get("loses_data") and component[0] == "RenderedFiles":
        return Disruption("in place", what, "replaced; `pulumi up` uploads the rendered artifact into the new one")
    if gone and data.get("loses_data"):
        verb = "replaced by an empty one" if change.action == REPLACE else "deleted"
        return Disruption("data loss", what, f"{verb}: the data stored on it is lost unless copied out first", part)
    if kind == "Instance" and component[0] == "TrainingFleet":
        if gone:
            return Disruption("replace with state", what,
                              f"the Slurm controller is {'replaced' if change.action == REPLACE else 'deleted'}: "
                              "slurmctld is down until the new instance has booted and mounted the state volume; "
                              "jobs submitted meanwhile fail, running jobs keep running on their nodes", part)
        if any(_forces(i.path, data.get("restarts_on", [])) for i in change.inputs):
            return Disruption("in place", what, "stopped and started: slurmctld is down for the minutes the "
                                                "instance takes to boot; running jobs keep running on their nodes")
    if kind == "NodeGroup":
        nodes = "all nodes" if change.action == REPLACE else "the nodes"
        if change.action == UPDATE and any(i.path == MIG_CONFIG_INPUT for i in change.inputs):
            return Disruption("drain", what, MIG_RELABEL)
        if gone:
            return Disruption("drain", what, f"{nodes} of the node group are cordoned and drained (pods evicted "
                                             "within their PodDisruptionBudgets), then terminated")
        if any(_forces(i.path, data.get("rolls_nodes_on", [])) for i in change.inputs):
            return Disruption("node roll", what, "EKS launches new nodes first (up to 2 per Availability Zone, or "
                                                 "maxUnavailable), drains the old ones and terminates them")
        turn = repair_turn(change)
        if turn is not None:  # no node restarts now; with repair on, EKS may restart or replace one later
            return Disruption("in place", what, "node auto repair turned on: running nodes stay; from now on EKS "
                              "reboots or replaces an unhealthy node by itself, one at a time" if turn else
                              "node auto repair turned off: running nodes stay; an unhealthy node stays until a "
                              "person drains it")
    if kind == "LaunchTemplate" and component[0] == "TrainingFleet":
        if change.action == UPDATE and not any(i.path.split(".")[0] in TRAINING_ROLL_INPUTS for i in change.inputs):
            return Disruption("in place", what, "a new launch template version: nodes launched from now on (power "
                                                "up after suspend, replacements) boot from it; running nodes keep "
                                                "theirs")
        return Disruption("node roll", what,
                          "running nodes keep the old instance until their jobs end; each is then drained and "
                          "replaced (terminated, launched again from the new launch template under the same "
                          "name); needs no spare capacity: a node is replaced only after it is idle")
    if kind == "Namespace" and (change.action == DELETE or any(
            i.forces_replacement and not i.via and i.path != "(region)" for i in change.inputs)):
        # deleting a namespace deletes every object in it (Kubernetes docs, "Namespaces": "Deleting a namespace
        # ... deletes everything under the namespace"), also what users made there and fleetform never saw; one
        # replaced because its cluster is (a region move, an input computed from a replaced resource) is that
        # cluster's loss, which the cluster's own change says
        return Disruption("data loss", what, f"{'replaced' if change.action == REPLACE else 'deleted'}: Kubernetes "
                          "deletes every object in it, also those fleetform does not manage (jobs users submitted "
                          "there, JobSets, RayJobs, Secrets they made) and their pods; move what must stay first",
                          part)
    if kind == "Cluster" and gone:
        return Disruption("replace with state", what, "a new EKS cluster: every object in the old one (also those "
                                                      "fleetform does not manage) is gone; all pods start again")
    if kind == "RayCluster" and not gone:
        from .ray import recreates_pods

        if recreates_pods((i.path, i.old, i.new) for i in change.inputs):
            return Disruption("drain", what, "KubeRay recreates every pod of the RayCluster (upgradeStrategy "
                                             "Recreate; its spec changed beyond the worker counts): running Ray "
                                             "jobs end, let them finish first")
    if kind == "Release" and not gone and any(
            i.path.startswith("values.nodesets.") and i.path.endswith(".replicas") and isinstance(i.old, (int, float))
            and isinstance(i.new, (int, float)) and i.new < i.old for i in change.inputs):
        # a Slinky fleet's NodeSet scales in with its node group: the operator drains the Slurm nodes of the pods it
        # removes (nodeset_sync.go processCondemned), but EKS terminates the instances the node group's Auto Scaling
        # group picks when its size falls (EKS API NodegroupScalingConfig desiredSize; its drain of a managed node
        # lasts minutes, EKS User Guide "Delete a managed node group"), whichever slurmd pods and jobs they run
        return Disruption("drain", what, "Slinky's NodeSet scales in: the operator drains the Slurm nodes of the "
                                         "slurmd pods it removes, but the smaller node group makes EKS terminate "
                                         "instances its Auto Scaling group picks, whichever slurmd pods run there: "
                                         "jobs on them end; drain the fleet's Slurm nodes and wait for their jobs "
                                         "first")
    if kind == "Release" and not gone and any((i.path.startswith("values.nodesets.") and not i.path.endswith(
            ".replicas")) or i.path.startswith("values.sssd") for i in change.inputs):
        # a Slinky fleet's `slurm` release (fleetform/slinky.py): slurm-operator v1.2.1 rolls the NodeSet
        # (internal/controller/nodeset/nodeset_sync.go syncRollingUpdate -> doPodScale: a condemned pod's Slurm node
        # is drained, and the pod deleted only once IsNodeDrained, i.e. its jobs ended). A new sssd.conf is a new
        # pod template too: the operator annotates it with the sssd.conf Secret's hash (workerbuilder/worker_app.go
        # getWorkerHashes, AnnotationSssdConfHash), and on the LoginSet's: its Deployment's pod template carries the
        # same hash (loginbuilder/login_app.go loginPodTemplate, getLoginHashes), so the login pod is replaced and
        # the shells users hold in it (kubectl exec) end
        login = ("; the LoginSet's login pod is replaced too (its template carries the sssd.conf hash): shells in it "
                 "(kubectl exec sessions) end" if any(i.path.startswith("values.sssd") for i in change.inputs) else "")
        return Disruption("node roll", what, "Slinky's NodeSet rolls its slurmd pods (RollingUpdate, at most 25% at "
                                             "a time): each old pod's Slurm node is drained and the pod replaced "
                                             "once its jobs end; running jobs finish on the old pods" + login)
    resized = next((i for i in change.inputs if i.path == CLAIM_REQUEST), None) if kind == "PersistentVolumeClaim" \
        and change.action == UPDATE else None
    if resized is not None:
        return Disruption("in place", what, claim_resize(resized.old, resized.new))
    if kind == "Gateway" and change.action == UPDATE and any(
            i.path.startswith("spec.listeners") and _listener_ports(i.old) != _listener_ports(i.new)
            for i in change.inputs):
        # kgateway v2.1's deployer makes every listener port a port of the proxy's Service and a containerPort of its
        # Envoy (pkg/deployer/values_helpers.go GetPortsValues -> helm proxy-deployment.yaml), so a port added or
        # removed is a new pod template; its default GatewayParameters give the pod a preStop that fails Envoy's
        # health check and sleeps 10 s (gracefulShutdown), then Envoy stops
        return Disruption("rolling", what, PROXY_ROLL)
    if kind == "GatewayParameters" and change.action == UPDATE:
        if any(i.path.startswith(PROXY_POD_PATHS) for i in change.inputs):
            return Disruption("rolling", what, PROXY_TEMPLATE)
        scaled = next((i for i in change.inputs if i.path == "spec.kube.deployment.replicas"), None)
        if scaled is not None and isinstance(scaled.old, int) and isinstance(scaled.new, int):
            return Disruption("rolling", what, PROXY_FEWER) if scaled.new < scaled.old else Disruption(
                "in place", what, PROXY_MORE)
    if kind == "Deployment":
        if gone:
            return Disruption("drain", what, "its pods are terminated after their grace period")
        if change.recreate:
            # strategy Recreate (an endpoint picker, as the inferencepool chart makes it: one replica): "All existing
            # Pods are killed before new ones are created" (Kubernetes docs, Deployments, Recreate Deployment)
            return Disruption("drain", what, "strategy Recreate: Kubernetes stops its pods before it starts the new "
                                             "ones, so what it serves is down until a new pod is ready (an endpoint "
                                             "picker: its model's route answers nothing meanwhile)")
        return Disruption("rolling", what, "Kubernetes replaces the pods one by one (maxSurge/maxUnavailable); "
                                           "each new pod serves once its startup probe passes")
    if change.action == REPLACE:
        return Disruption("in place", what, GENERIC[2])
    if change.action == DELETE:
        return Disruption("in place", what, GENERIC[3])
    return Disruption("in place", what, GENERIC[4])


def ray_fleets(*models) -> frozenset[str]:
    """The names of the fleets scheduled by Ray on either side of a diff (their nccl.env reaches no node)."""
    return frozenset(f.name for m in models if m is not None for f in m.fleets
                     if f.scheduler is not None and f.scheduler.type == "ray")


def slinky_fleets(*models) -> frozenset[str]:
    """The names of the fleets scheduled by Slinky on either side of a diff (their nccl.env reaches no node)."""
    return frozenset(f.name for m in models if m is not None for f in m.fleets
                     if f.scheduler is not None and f.scheduler.type == "slinky")


def file_disruption(path: str, mark: str, old: bytes | None = None, new: bytes | None = None,
                    ray: frozenset[str] = frozenset(), slinky: frozenset[str] = frozenset()) -> Disruption | None:
    """What a changed rendered file does on the machines (the day-2 contract: `pulumi up` uploads the
    rendered folder; each training fleet's controller keeper applies it within about a minute).
    `old` and `new` are the file's two versions, where its content decides (fleet.json's generation);
    `ray`: the fleets scheduled by Ray (ray_fleets), whose nodes run no keeper; `slinky`: those scheduled by
    Slinky (slinky_fleets), whose slurmd pods run none either."""
    parts = path.split("/")
    if parts[1:] == ["nccl.env"] and parts[0] in slinky:
        # fleetform/slinky.py: the variables are the login pod's env (values.loginsets.<fleet>.login.env); the chart's
        # LoginSet is a Deployment's pod template, so a changed env replaces the login pod; sbatch copies the
        # submitter's environment into the job when it is submitted (--export=ALL)
        return Disruption("next job", path, "no node reads this file on a Slinky fleet: the same variables are its "
                                            "login pod's env, and the new login pod replaces the old one (shells "
                                            "in it end); jobs submitted from the new pod get them, jobs already "
                                            "submitted keep the environment they were submitted with")
    if parts[1:] == ["nccl.env"] and parts[0] in ray:
        return Disruption("drain", path, "no node reads this file on a Ray fleet: its workers get the same variables "
                                         "from the RayCluster's env, and KubeRay recreates every pod of the RayCluster "
                                         "for the change (upgradeStrategy Recreate): running Ray jobs end, let them "
                                         "finish first")
    if parts[1:] == ["slurm", "bin", "fleet.json"] and old and new and _generation(old) != _generation(new):
        return Disruption("node roll", path, "its node generation changed (instance type, image, fabric, placement "
                                             "or capacity: fleetform/slurm.py node_generation): the keeper drains "
                                             "each node launched from the old one and replaces it once its jobs "
                                             "end, under the same name; no capacity beyond the fleet's nodes")
    if parts[1:] == ["slurm", "slurmdbd.conf"]:  # docs/accounting.md
        return Disruption("in place", path, "slurmdbd reads it only when it starts: restart slurmdbd on the "
                                            "controller; slurmctld keeps the job records meanwhile and sends them "
                                            "once it is back; running jobs continue")
    if parts[1:] == ["slurm", "accounts.cfg"]:
        return Disruption("in place", path, "load it on the controller with `sacctmgr -i load file=accounts.cfg`: "
                                            "budgets and limits change at once for waiting and new jobs; a team "
                                            "no longer listed stays until `sacctmgr delete account`")
    if len(parts) >= 3 and parts[1] == "slurm" and parts[-1].endswith(".conf"):
        return Disruption("in place", path, "within about a minute the controller's keeper installs it and runs "
                                            "`scontrol reconfigure`: slurmctld and every slurmd read it; running "
                                            "jobs continue; nodes added are powered up, nodes removed are drained "
                                            "and terminated once idle")
    if len(parts) == 2 and parts[1] == "nccl.env":
        return Disruption("next job", path, "every node installs it before the next job starts on it; a running "
                                            "job keeps the environment it started with, and no job mixes two "
                                            "versions across its nodes")
    if parts[1:] == ["slurm", "bin", "users.json"]:
        return Disruption("in place", path, "the controller's keeper and each node's update timer make the users "
                                            "and groups added (and set existing users' groups) within about a "
                                            "minute, login nodes' update timers too; a user removed stays on "
                                            "running machines until they are replaced (login nodes drop the "
                                            "keys the blueprint gave them; a key of their own in "
                                            "~/.ssh/authorized_keys still lets them in: lock the account)")
    if len(parts) >= 3 and parts[1] == "slurm" and parts[2] == "bin":
        return Disruption("in place", path, "the keeper installs it with the rest of the artifact; programs run "
                                            "from then on (resume, suspend, prologs) use the new version")
    if len(parts) >= 3 and parts[1] == "k8s" and path.endswith("-deployment.yaml"):
        return Disruption("rolling", path, "applied by `pulumi up`: Kubernetes replaces the pods one by one")
    if parts[1:] == ["node", "user-data"] and old is not None and new is not None:
        # fleetform/render/prepull.py: the launch template's user data; a new template version rolls the group
        return Disruption("node roll", path, "the EKS node group's user data (its pre-pulled images): a new launch "
                                             "template version, so EKS launches new nodes first (up to 2 per "
                                             "Availability Zone, or maxUnavailable), drains the old ones and "
                                             "terminates them")
    return None


def _generation(fleet_json: bytes) -> str | None:
    try:
        return json.loads(fleet_json).get("generation")
    except (ValueError, AttributeError):
        return None


def model_changes(old_model, new_model, renames: dict[str, str]) -> list[dict]:
    """Models of inference fleets replaced by others: a model removed and one added in the same fleet
    (paired in order), or one name serving another model. Each side with its model id, GPUs per
    replica, replicas, and the startup budget its Deployment's startup probe gives it (the model's
    `kube` server, fleetform/k8s.py)."""
    def side(fleet, model) -> dict:
        server = next((s for s in (fleet.kube.servers if fleet.kube else ()) if s.name == model.name), None)
        probe = next((p for p in server.probes if p.kind == "startup"), None) if server else None
        return {"name": model.name, "model": model.model, "gpus_per_replica": model.gpus,
                "replicas": [model.replicas.min, model.replicas.max],
                "instance_type": fleet.instance_type,
                "startup_budget_s": probe.period_s * probe.failure_threshold if probe else None}

    old_fleets = {renames.get(f.name, f.name): f for f in old_model.fleets if f.role == "inference"}
    out = []
    for fleet in new_model.fleets:
        before = old_fleets.get(fleet.name)
        if fleet.role != "inference" or before is None:
            continue
        old_by, new_by = {m.name: m for m in before.models}, {m.name: m for m in fleet.models}
        for name in sorted(set(old_by) & set(new_by)):
            if old_by[name].model != new_by[name].model:
                out.append({"fleet": fleet.name, "old": side(before, old_by[name]), "new": side(fleet, new_by[name])})
        removed = [m for m in before.models if m.name not in new_by]
        added = [m for m in fleet.models if m.name not in old_by]
        for a, b in zip(removed, added):
            out.append({"fleet": fleet.name, "old": side(before, a), "new": side(fleet, b)})
    return out


def model_change_text(item: dict) -> str:
    def one(s: dict) -> str:
        low, high = s["replicas"]
        replicas = f"{low}" if low == high else f"{low}-{high}"
        return (f"{s['name']} ({s['model']}, {s['gpus_per_replica']} GPU{'s' if s['gpus_per_replica'] != 1 else ''} "
                f"of {s['instance_type']} per replica x {replicas} replicas)")

    budget = item["new"]["startup_budget_s"]
    startup = f"; a new replica may take up to {budget // 60} min to start (its startup probe's budget)" \
        if budget else ""
    return f"fleet {item['fleet']}: model {one(item['old'])} replaced by {one(item['new'])}{startup}"


def region_move(old_model, new_model, disruptions: list[Disruption]) -> dict | None:
    """A blueprint that moves region: what is replaced, which data is lost, and how to move safely."""
    if old_model.region == new_model.region:
        return None
    lost = [d.what for d in disruptions if d.cls == "data loss"]
    if not any(d.what.startswith(("Bucket ", "LustreFileSystem ", "Volume ")) for d in disruptions):
        # the cloud resources were not compared (--no-resources): what the blueprint declares is lost all the same
        lost = [f"storage {s.name} ({s.type})" for s in new_model.storage] + \
               [f"fleet {f.name}'s Slurm state volume" for f in new_model.fleets if f.role == "training"
                and getattr(f, "scheduler", None) is not None and type(f.scheduler).__name__ == "SlurmScheduler"]
    steps = [f"bring the fleets up in {new_model.region} as a second blueprint (another metadata.name) beside the "
             f"running one instead of moving this one: nothing is lost until the old one is destroyed",
             "copy the data first: every checkpoint bucket to a bucket in the new region (`aws s3 sync` or S3 "
             "Batch Replication), FSx data exported to S3 (its data repository association) and copied likewise",
             "drain the Slurm queue: the controller's state volume (job queue, job ids) is not carried over",
             "Capacity Blocks and capacity reservations belong to one Availability Zone: reserve in the new "
             "region before the move",
             "then point the blueprint's checkpoint and import paths at the copied data and destroy the old stack"]
    return {"old": old_model.region, "new": new_model.region, "data_lost": lost, "steps": steps}


def rollout_fit(new_model, disruptions: list[Disruption], changes: list[Change]) -> list[tuple]:
    """(path, message, hint) of every rolling update that cannot fit in the capacity its fleet has:
    a Deployment's surge (maxSurge x GPUs per replica) against the GPUs the fleet's node maximum
    leaves spare with every model at its maximum replicas; an EKS node roll or replacement of a
    fleet on a reservation or Capacity Block, whose new nodes EKS launches before it drains the old
    ones (EKS_SURGE_SOURCE)."""
    out = []
    rolled = {d.what for d in disruptions if d.cls in ("rolling", "node roll", "drain")}
    for fleet in new_model.fleets:
        if fleet.role != "inference" or fleet.kube is None or fleet.shape is None or fleet.nodes is None:
            continue
        gpus = fleet.nodes.max * fleet.shape.gpu_count
        used = sum(m.replicas.max * m.gpus for m in fleet.models)
        whole = fleet.gpu_sharing.strategy in ("none", None)
        for model in fleet.models:
            names = {f"Deployment {fleet.name}-deployment-{fleet.kube.namespace}-{model.name}",
                     f"{fleet.name}/k8s/{model.name}-deployment.yaml"}
            if not names & rolled or not whole or not model.max_surge:
                continue
            need = model.max_surge * model.gpus
            spare = gpus - used
            if need > spare:
                out.append((model.path + ("max_surge",),
                            f"the rolling update of model {model.name} needs {need} spare GPUs (max_surge "
                            f"{model.max_surge} x {model.gpus} GPUs per replica), but fleet {fleet.name} "
                            f"has {spare}: {fleet.nodes.max} nodes x {fleet.shape.gpu_count} GPUs = {gpus}, "
                            f"{used} of them taken with every model at its maximum replicas",
                            "lower max_surge (0: one replica at a time is taken down, no spare GPU needed), lower "
                            "replicas.max, or raise the fleet's nodes.max"))
        if fleet.capacity_type in ("reservation", "capacity-block"):
            groups = [c for c in changes if c.short_type == "NodeGroup" and c.name == f"{fleet.name}-gpu"
                      and f"NodeGroup {c.name}" in rolled]
            replaced = [c for c in groups if c.action == REPLACE]
            if replaced:
                # a new node group (Pulumi creates it before it deletes the old one), not EKS's rolling
                # update: its nodes.min nodes come on top of the old group's; and a reservation or
                # Capacity Block holds one instance type, so a changed type cannot launch in it at all
                types = next(((i.old, i.new) for i in replaced[0].inputs if i.path.split(".")[0] == "instanceTypes"
                              and i.old != i.new), None)
                types = tuple(", ".join(t) if isinstance(t, (list, tuple)) else str(t) for t in types) if types else None
                if types:
                    out.append((fleet.path + ("capacity",),
                                f"the instance type change ({types[0]} -> {types[1]}) replaces fleet {fleet.name}'s "
                                f"node group: Pulumi creates the new node group ({fleet.nodes.min} node{'s' if fleet.nodes.min != 1 else ''} at first) "
                                f"before it deletes the old one, and a {fleet.capacity_type} holds one instance type "
                                f"({types[0]}): the new group's {types[1]} nodes cannot launch in it",
                                f"get a {fleet.capacity_type} for {types[1]} first and set its id in capacity, or "
                                f"move the fleet to on-demand for the change"))
                else:
                    out.append((fleet.path + ("capacity",),
                                f"fleet {fleet.name}'s node group is replaced: Pulumi creates the new node group "
                                f"({fleet.nodes.min} nodes at first) before it deletes the old one: up to "
                                f"{fleet.nodes.max} + {fleet.nodes.min} = {fleet.nodes.max + fleet.nodes.min} nodes, "
                                f"beyond a {fleet.capacity_type} sized for the fleet's {fleet.nodes.max}",
                                f"reserve {fleet.nodes.min} more nodes for the change, or first lower nodes.max to "
                                f"{max(fleet.nodes.max - fleet.nodes.min, 0)}, apply, then make this change"))
                continue
            if groups:
                surge = 2  # twice the one Availability Zone fleetform's node groups use, >= maxUnavailable 1
                out.append((fleet.path + ("capacity",),
                            f"EKS replaces the nodes of fleet {fleet.name} by launching up to {surge} new nodes "
                            f"before it drains old ones ({EKS_SURGE_SOURCE}): {fleet.nodes.max} + {surge} = "
                            f"{fleet.nodes.max + surge} nodes, beyond a {fleet.capacity_type} sized for the "
                            f"fleet's {fleet.nodes.max}",
                            f"reserve {surge} more nodes for the update, or first lower nodes.max to "
                            f"{max(fleet.nodes.max - surge, 0)}, apply, then make this change"))
    return out


def _cluster_ids(resources: list[dict]) -> set[str]:
    return {(r.get("inputs") or {}).get("tags", {}).get("fleetform:cluster") for r in resources
            if isinstance((r.get("inputs") or {}).get("tags"), dict)} - {None}


EKS_CLUSTER_TYPE = "aws:eks/cluster:Cluster"


def cluster_id_change(old_resources: list[dict], new_resources: list[dict], changes: list[Change],
                      disruptions: list[Disruption]) -> dict | None:
    """A change of the cluster id (`<metadata.name>_<stack>`, the tag fleetform:cluster on every resource):
    the EKS cluster is named after it and the buckets' prefixes after the blueprint, so the same stack
    replaces them and everything built on them; what it replaces, what data it loses, and how to rename
    without losing anything. Read from the two recorded plans (the id is an input of every resource)."""
    old_ids, new_ids = _cluster_ids(old_resources), _cluster_ids(new_resources)
    if not old_ids or not new_ids or old_ids == new_ids:
        return None
    clusters = [c for c in changes if c.type == EKS_CLUSTER_TYPE and c.action in ("replace", "delete", "create")]
    replaced = sum(1 for c in changes if c.action == "replace")
    eks = [f"EKS cluster {c.name} (named after the id): {'replaced by a new, empty cluster' if c.action == 'replace' else c.action + 'd'}"
           for c in clusters]
    steps = ["a new metadata.name (or a new Pulumi stack) is a new deployment: keep metadata.name to change anything "
             "else in place",
             "to rename, bring the renamed blueprint up as another stack beside the running one: nothing is lost "
             "until the old stack is destroyed",
             "copy the data first: checkpoint buckets (`aws s3 sync`), FSx data exported to S3; drain the Slurm queue "
             "(the controller's state volume is not carried over)",
             "move clients to the new cluster's endpoint (`aws eks update-kubeconfig --name <new id>`) and Secrets "
             "(`pulumi config set --secret` on the new stack), then `pulumi destroy` the old stack"]
    return {"old": sorted(old_ids)[0], "new": sorted(new_ids)[0], "replaced": replaced, "eks": eks,
            "data_lost": [d.what for d in disruptions if d.cls == "data loss"], "steps": steps}
