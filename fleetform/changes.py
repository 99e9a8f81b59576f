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


def _effects(change: Change, old: dict | None, new: dict | None, data: dict) -> list[str]:
    effects = []
    res = new or old
    kind = change.short_type
    if change.action in (REPLACE, DELETE) and data.get("loses_data"):
        effects.append(f"{'replaces' if change.action == REPLACE else 'deletes'} {kind} {change.name}: "
                       "the data stored on it is lost")
    if kind == "NodeGroup":
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
    if kind == "Instance":
        itype = res["inputs"].get("instanceType", "?")
        if change.action == REPLACE:
            effects.append(f"replaces instance {change.name} ({itype})")
        elif change.action == UPDATE and any(_forces(i.path, data.get("restarts_on", [])) for i in change.inputs):
            effects.append(f"stops and starts instance {change.name} ({itype})")
    return effects


def compare(old_resources: list[dict], new_resources: list[dict]) -> list[Change]:
    """The changes from one recorded plan to another, in a stable order."""
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
        change = Change(action, res["type"], name, before["name"], sorted(inputs, key=lambda i: i.path),
                        known=data is not None)
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
