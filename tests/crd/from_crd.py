"""Turn a CustomResourceDefinition from an upstream release into the JSON Schema tests/test_k8s.py
validates rendered objects with: the version's openAPIV3Schema, every object in it closed
(additionalProperties: false) unless the CRD keeps unknown fields (x-kubernetes-preserve-unknown-fields)
or gives a schema for them: the API server prunes an unknown field of a structural schema without a
word, so a misspelt field fleetform wrote would vanish. apiVersion and kind are pinned, metadata needs a
name. The CRD's CEL rules (x-kubernetes-validations) are not JSON Schema: they stay in the
schema, and tests/crd_cel.py evaluates them.

    python tests/crd/from_crd.py CRD.yaml VERSION SOURCE > tests/crd/<group>_<version>_<Kind>.json

SOURCE is the line kept in the file's description (repository, tag, commit, path); README.md lists
every file with its source."""

from __future__ import annotations

import json
import sys

import yaml


def close(node):
    """Close every object schema that lists its properties and says nothing of others."""
    if isinstance(node, dict):
        if ("properties" in node and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")):
            node["additionalProperties"] = False
        for value in node.values():
            close(value)
    elif isinstance(node, list):
        for value in node:
            close(value)
    return node


def convert(crd: dict, version: str, source: str) -> dict:
    spec = crd["spec"]
    (entry,) = [v for v in spec["versions"] if v["name"] == version]
    schema = close(entry["schema"]["openAPIV3Schema"])
    group, kind = spec["group"], spec["names"]["kind"]
    properties = dict(schema["properties"])
    properties["apiVersion"] = {"const": f"{group}/{version}"}
    properties["kind"] = {"const": kind}
    properties["metadata"] = {"type": "object", "required": ["name"],
                              "properties": {"name": {"type": "string", "minLength": 1},
                                             "namespace": {"type": "string"}}}
    properties.pop("status", None)  # written by the controller, never by fleetform
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": f"{kind} ({group}/{version})",
            "description": f"openAPIV3Schema of {source}, extracted by tests/crd/from_crd.py",
            "type": "object", "additionalProperties": False,
            "required": sorted(set(schema.get("required", [])) | {"apiVersion", "kind", "metadata", "spec"}),
            "properties": properties}


if __name__ == "__main__":
    path, version, source = sys.argv[1:4]
    with open(path, encoding="utf-8") as stream:
        print(json.dumps(convert(yaml.safe_load(stream), version, source), indent=1, sort_keys=True))
