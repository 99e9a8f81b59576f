"""Write tests/crd/ray.io_v1_RayCluster.json and ray.io_v1_RayJob.json from KubeRay's own CRDs.

Usage: python tests/tools/kuberay_crds.py KUBERAY_GIT_DIR [TAG]   (TAG default v1.7.0, fleetform/ray.py's pin)

Reads helm-chart/kuberay-operator/crds/ray.io_rayclusters.yaml and ray.io_rayjobs.yaml at the tag (git show),
takes the served v1 version's openAPIV3Schema and turns it into a JSON Schema the tests run with jsonschema:
descriptions dropped (size), `x-kubernetes-int-or-string` as integer-or-string, and every object that lists
`properties` closed (`additionalProperties: false`) unless it preserves unknown fields, which is what the API
server's strict field validation (`kubectl apply --validate=strict`, the default) does with an unknown field.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

FILES = {"RayCluster": "ray.io_rayclusters.yaml", "RayJob": "ray.io_rayjobs.yaml"}


def convert(node):
    if isinstance(node, list):
        return [convert(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: convert(v) for k, v in node.items() if k != "description" or not isinstance(v, str)}
    if out.pop("x-kubernetes-int-or-string", False):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}] + out.pop("anyOf", [])[2:]
    preserve = out.pop("x-kubernetes-preserve-unknown-fields", False)
    for key in [k for k in out if k.startswith("x-kubernetes-")]:
        out.pop(key)
    if out.get("type") == "object" and "properties" in out and "additionalProperties" not in out and not preserve:
        out["additionalProperties"] = False
    if out.get("nullable"):
        out.pop("nullable")
        if "type" in out:
            out["type"] = [out["type"], "null"]
    else:
        out.pop("nullable", None)
    return out


def main(repo: str, tag: str = "v1.7.0") -> None:
    out_dir = Path(__file__).resolve().parent.parent / "crd"
    for kind, name in FILES.items():
        text = subprocess.run(["git", "--git-dir", repo, "show", f"{tag}:helm-chart/kuberay-operator/crds/{name}"],
                              check=True, capture_output=True, text=True).stdout
        crd = yaml.safe_load(text)
        (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
        schema = convert(version["schema"]["openAPIV3Schema"])
        props = schema["properties"]
        props["apiVersion"] = {"const": "ray.io/v1"}
        props["kind"] = {"const": kind}
        props["metadata"] = {"type": "object"}
        schema = {"$schema": "https://json-schema.org/draft/2020-12/schema",
                  "title": f"KubeRay {kind} (ray.io/v1), {tag}",
                  "description": f"Converted by tests/tools/kuberay_crds.py from github.com/ray-project/kuberay "
                                 f"tag {tag}, helm-chart/kuberay-operator/crds/{name} (openAPIV3Schema of v1).",
                  **schema, "required": sorted(set(schema.get("required", [])) | {"apiVersion", "kind", "metadata"})}
        (out_dir / f"ray.io_v1_{kind}.json").write_text(json.dumps(schema, separators=(",", ":"), sort_keys=True) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
