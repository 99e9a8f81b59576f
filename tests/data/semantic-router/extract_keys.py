"""Writes config-keys-v0.3.0.json: the YAML keys vLLM's Semantic Router parses, per Go struct, from its source.

Run against a clone of github.com/vllm-project/semantic-router:
    python3 extract_keys.py /path/to/semantic-router v0.3.0 > config-keys-v0.3.0.json
It reads src/semantic-router/pkg/config/*.go at the tag (git show), collects every `type X struct { ... }` with
its fields' `yaml:"key"` tags (an embedded field tagged `,inline` merges its struct's keys) and the aliases
`type A = B`, and keeps the structs reachable from CanonicalConfig (the v0.3 config file) and from the decision
plugins' payloads fleetform writes (HeaderMutationPluginConfig: plugin_config.go decodes a header_mutation
plugin's `configuration` into it)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

STRUCT = re.compile(r"^type (\w+) struct \{\n(.*?)^\}", re.S | re.M)
ALIAS = re.compile(r"^\s*(\w+)\s*=\s*(\w+)\s*$", re.M)
FIELD = re.compile(r"^\s*(?:(\w+)\s+)?([\w.\[\]*]+(?:\[[\w.]+\][\w.*\[\]]+)?)\s+`[^`]*yaml:\"([^\"]*)\"[^`]*`")
ROOTS = ("CanonicalConfig", "HeaderMutationPluginConfig")


def go_files(repo: str, tag: str) -> list[str]:
    names = subprocess.run(["git", "-C", repo, "ls-tree", "--name-only", f"{tag}:src/semantic-router/pkg/config/"],
                           check=True, capture_output=True, text=True).stdout.split()
    return [subprocess.run(["git", "-C", repo, "show", f"{tag}:src/semantic-router/pkg/config/{n}"], check=True,
                           capture_output=True, text=True).stdout
            for n in names if n.endswith(".go") and not n.endswith("_test.go")]


def base(type_: str) -> str:
    type_ = type_.lstrip("*[]")
    if type_.startswith("map["):
        type_ = type_[type_.index("]") + 1:].lstrip("*[]")
    return type_


def main(repo: str, tag: str) -> None:
    structs: dict[str, dict[str, str]] = {}
    aliases: dict[str, str] = {}
    for text in go_files(repo, tag):
        for name, body in STRUCT.findall(text):
            fields: dict[str, str] = {}
            for line in body.splitlines():
                m = FIELD.match(line)
                if not m:
                    continue
                field, type_, tag_ = m.groups()
                key, _, opts = tag_.partition(",")
                if key == "-":
                    continue
                fields[key if key else "<inline>:" + base(type_)] = type_
            structs[name] = fields
        for block in re.findall(r"^type \(\n(.*?)^\)", text, re.S | re.M):
            aliases.update(ALIAS.findall(block))
        aliases.update(re.findall(r"^type (\w+) = (\w+)$", text, re.M))
    keep, todo = {}, list(ROOTS)
    while todo:
        name = todo.pop()
        name = aliases.get(name, name)
        if name in keep or name not in structs:
            continue
        keep[name] = structs[name]
        for key, type_ in structs[name].items():
            todo.append(key.split(":", 1)[1] if key.startswith("<inline>:") else base(type_))
    json.dump({"source": f"github.com/vllm-project/semantic-router {tag}, src/semantic-router/pkg/config/*.go "
                         "(extract_keys.py)", "aliases": dict(sorted(aliases.items())),
               "structs": {k: keep[k] for k in sorted(keep)}}, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
