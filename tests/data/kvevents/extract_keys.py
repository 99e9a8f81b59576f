"""Writes picker-keys-<release>.json: the JSON keys the precise picker's config file is decoded with, per Go struct.

Run against clones (or `fetch` snapshots) of the three repositories:
    python3 extract_keys.py GIE_REPO SCHEDULER_REPO KVCACHE_REPO [v0.5.0] > picker-keys-v0.5.0.json
(the KV cache library was renamed llm-d-kv-cache at v0.5.0; its repository keeps the older tags).
The tags of each llm-d-inference-scheduler release are its go.mod's (RELEASES).
It reads each file below at its tag (git show), collects every `type X struct { ... }` field with a `json:"key"`
tag (its Go type kept, a `.`-qualified type resolved to `package.Type`), and every plugin type name the picker
registers (`...Type = "name"` constants of the registered plugins)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

STRUCT = re.compile(r"^type (\w+) struct \{\n(.*?)^\}", re.S | re.M)
FIELD = re.compile(r"^\s*\w+\s+([\w.\[\]*]+)\s+`[^`]*json:\"([^\",]*)[^\"]*\"[^`]*`", re.M)
TYPE_NAME = re.compile(r"^\s*\w+Type\s*=\s*\"([a-z0-9-]+)\"", re.M)
KVCACHE_FILES_V04 = {
    "kvcache": ["pkg/kvcache/indexer.go"],
    "kvblock": ["pkg/kvcache/kvblock/token_processor.go", "pkg/kvcache/kvblock/index.go"],
    "kvevents": ["pkg/kvcache/kvevents/pool.go"],
    "tokenization": ["pkg/tokenization/pool.go", "pkg/tokenization/tokenizer.go"],
    "prefixstore": ["pkg/tokenization/prefixstore/lru_store.go"]}
RELEASES = {
    # scheduler tag: (extension, KV cache library), from the scheduler's go.mod at that tag
    "v0.4.0": (("sigs.k8s.io/gateway-api-inference-extension", "v1.2.0"),
               ("github.com/llm-d/llm-d-kv-cache-manager", "v0.4.0", KVCACHE_FILES_V04)),
    "v0.5.0": (("sigs.k8s.io/gateway-api-inference-extension", "v1.3.0"),
               ("github.com/llm-d/llm-d-kv-cache", "v0.5.0",
                dict(KVCACHE_FILES_V04, kvevents=["pkg/kvevents/pool.go"]))),
}
PLUGIN_DIRS = ((0, "pkg/epp/scheduling/framework/plugins"), (1, "pkg/plugins"))


def show(repo: str, tag: str, path: str) -> str:
    return subprocess.run(["git", "-C", repo, "show", f"{tag}:{path}"], check=True, capture_output=True,
                          text=True).stdout


def tokenization(repo: str, tag: str) -> dict[str, bool]:
    """How the KV cache library at `tag` tokenizes a request, read from its source: whether a completion's prompt is
    encoded with special tokens and a rendered chat prompt without (pkg/tokenization/pool.go processTask sets
    `addSpecialToken := true` and turns it off after ApplyChatTemplate; before v0.5.0 tokenizer.go's Encode passes
    one constant for both), and whether the chat-template helper
    loads the folder of a local tokenizer.json path (pkg/preprocessing/chat_completions/tokenizer_wrapper.py:
    `model_name = os.path.dirname(model_name)` under `is_local and os.path.isfile`; the file does not exist before
    v0.5.0, whose predecessor passed the path to AutoTokenizer.from_pretrained)."""
    pool = show(repo, tag, "pkg/tokenization/pool.go")
    body = pool[pool.find("func (pool *Pool) processTask"):]
    body = body[:body.find("\n}\n")]
    adds = re.search(r"addSpecialToken := true\n\s*if task\.RenderReq != nil \{(.*?)\n\t\}", body, re.S)
    try:
        wrapper = show(repo, tag, "pkg/preprocessing/chat_completions/tokenizer_wrapper.py")
    except subprocess.CalledProcessError:
        wrapper = ""
    if adds is not None:
        completion, chat = True, "addSpecialToken = false" not in adds.group(1)
    else:  # before v0.5.0 one constant for both: tokenizer.go Encode calls EncodeWithOptions(input, <bool>, ...)
        fixed = re.search(r"EncodeWithOptions\(input, (true|false)", show(repo, tag, "pkg/tokenization/tokenizer.go"))
        completion = chat = fixed.group(1) == "true"
    return {"completion_add_special_tokens": completion,
            "chat_add_special_tokens": chat,
            "chat_template_from_local_tokenizer_path": bool(re.search(
                r"if is_local and os\.path\.isfile\(model_name\):\s*\n(\s*#.*\n)*\s*model_name = "
                r"os\.path\.dirname\(model_name\)", wrapper))}


def main(gie: str, scheduler: str, kvcache: str, release: str = "v0.5.0") -> None:
    (gie_module, gie_tag), (kv_module, kv_tag, kv_files) = RELEASES[release]
    GIE = (gie_module, gie_tag, {"v1alpha1": ["apix/config/v1alpha1/endpointpickerconfig_types.go"]})
    SCHEDULER = ("github.com/llm-d/llm-d-inference-scheduler", release,
                 {"scorer": ["pkg/plugins/scorer/precise_prefix_cache.go"]})
    KVCACHE = (kv_module, kv_tag, kv_files)
    structs: dict[str, dict[str, str]] = {}
    sources = []
    for repo, (module, tag, packages) in ((gie, GIE), (scheduler, SCHEDULER), (kvcache, KVCACHE)):
        for package, paths in packages.items():
            for path in paths:
                sources.append(f"{module} {tag} {path}")
                for name, body in STRUCT.findall(show(repo, tag, path)):
                    fields = {key: (type_ if "." in type_ or type_.lstrip("*[]").islower()
                                    else type_.replace(type_.lstrip("*[]"), f"{package}.{type_.lstrip('*[]')}"))
                              for type_, key in FIELD.findall(body) if key and key != "-"}
                    if fields:
                        structs[f"{package}.{name}"] = fields
    types = set()
    for index, folder in PLUGIN_DIRS:
        repo, (module, tag, _) = ((gie, GIE), (scheduler, SCHEDULER))[index]
        names = subprocess.run(["git", "-C", repo, "ls-tree", "-r", "--name-only", tag, folder], check=True,
                               capture_output=True, text=True).stdout.split()
        for path in names:
            if path.endswith(".go") and not path.endswith("_test.go"):
                types.update(TYPE_NAME.findall(show(repo, tag, path)))
        sources.append(f"{module} {tag} {folder}/**/*.go (plugin type names)")
    json.dump({"source": sources, "structs": dict(sorted(structs.items())), "plugin_types": sorted(types),
               "tokenization": tokenization(kvcache, KVCACHE[1]), "scheduler": release, "kv_cache": list(KVCACHE[:2])},
              sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main(*sys.argv[1:5])
