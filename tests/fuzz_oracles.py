"""The consumers' readings of rendered files, for the schema-driven fuzz test (tests/test_fuzz_schema.py).

Each reader parses a rendered file the way the program that consumes it does, as far as that can be
done here without running the program:

- YAML (Kubernetes manifests, chart values): PyYAML's safe loader is a YAML 1.1 reader, as kubectl's
  (sigs.k8s.io/yaml over go-yaml v2) is; a strict YAML 1.2 core-schema reader beside it must read the
  same types, so a string stays a string for both. Every Kubernetes object's metadata.name and
  labels must pass the API server's own checks (apimachinery's validation: a DNS-1123 label or
  subdomain, label keys and values of at most 63 characters), which kubernetes-validate does not do.
- JSON: Python's json.
- Slurm's files (slurm.conf, gres.conf, topology.conf, cgroup.conf): Slurm's own tokenizer
  (src/common/parse_config.c, s_p_parse_line): `#` starts a comment unless escaped (`\\#`), a line is
  whitespace-separated `Key=Value` words, a value may be double-quoted. A word without `=` or a key
  the line's kind does not know is a finding: a value with a space or a `#` breaks the structure.
- sssd.conf (a Slinky fleet's): sssd's ini parser (ding-libs ini_parse.c), comments only at a line's
  start, so a value is the rest of its line.
- Environment files (nccl.env, user data's cluster.env): sourced by bash with `set -a`, as
  the Prolog/TaskProlog and systemd-free boot do, with PATH pointing at an empty folder so a command
  that an unquoted value would run is not found, and every variable read back.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import yaml

from fleetform import plaintext

# --- YAML -------------------------------------------------------------------------------------------


_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser when built with it: 5x faster


class Yaml12(_Loader):
    """The YAML 1.2 core schema's plain scalars: true/false and null only in their three spellings,
    decimal, 0o and 0x integers, and floats; everything else is a string."""


Yaml12.yaml_implicit_resolvers = {}
for _tag, _pattern, _first in [
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", "~nN"),
    ("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
    ("tag:yaml.org,2002:float", r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                                r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$", "-+.0123456789"),
]:
    Yaml12.add_implicit_resolver(_tag, re.compile(_pattern), list(_first) + ([""] if "~" in _first else []))
Yaml12.add_constructor("tag:yaml.org,2002:int", lambda loader, node: int(loader.construct_scalar(node), 0)
                       if loader.construct_scalar(node)[:2] in ("0o", "0x") else int(loader.construct_scalar(node)))
Yaml12.add_constructor("tag:yaml.org,2002:bool", lambda loader, node: loader.construct_scalar(node).lower() == "true")


def typed(value):
    """A value with the type of every scalar in it, so that True and 1 and "1" differ."""
    if isinstance(value, dict):
        return {typed(k): typed(v) for k, v in value.items()}
    if isinstance(value, list):
        return [typed(v) for v in value]
    if isinstance(value, float) and value != value:
        return ("float", "nan")
    return (type(value).__name__, value)


_RESOLVE_12 = [(tag, re.compile(pattern)) for tag, pattern in [
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$"),
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$"),
    ("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"),
    ("tag:yaml.org,2002:float", r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                                r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
]]
_STR = "tag:yaml.org,2002:str"


def _tag_12(node: yaml.ScalarNode) -> str:
    """The tag a YAML 1.2 core-schema reader gives a scalar (plain style: libyaml says '', PyYAML None)."""
    if node.style not in (None, "") or node.tag not in ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:null",
                                                  "tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
                                                  "tag:yaml.org,2002:timestamp", _STR):
        return node.tag  # quoted, or tagged explicitly: the same for both readers
    return next((tag for tag, pattern in _RESOLVE_12 if pattern.match(node.value)), _STR)


_SCALAR = yaml.SafeLoader.__new__(yaml.SafeLoader)
yaml.constructor.SafeConstructor.__init__(_SCALAR)


def _value(node, name: str):
    """The YAML 1.1 value of a node (PyYAML's safe constructor on each scalar), after checking that
    a YAML 1.2 reader gives every plain scalar the same type."""
    if isinstance(node, yaml.MappingNode):
        return {_value(k, name): _value(v, name) for k, v in node.value}
    if isinstance(node, yaml.SequenceNode):
        return [_value(item, name) for item in node.value]
    tag_12 = _tag_12(node)
    if tag_12 != node.tag:
        raise AssertionError(f"{name}: {node.value!r} at line {node.start_mark.line + 1} is {node.tag.split(':')[-1]} "
                             f"to a YAML 1.1 reader (kubectl) and {tag_12.split(':')[-1]} to a YAML 1.2 one")
    value = _SCALAR.yaml_constructors[node.tag](_SCALAR, node)
    if tag_12 == "tag:yaml.org,2002:int" and node.style in (None, ""):
        as_12 = int(node.value, 0) if node.value[:2] in ("0o", "0x") else int(node.value)
        assert as_12 == value, f"{name}: {node.value!r} is {value} to a YAML 1.1 reader and {as_12} to a 1.2 one"
    return value


def read_yaml(name: str, text: str) -> list:
    """The documents of a YAML file, read once by libyaml's parser; the 1.1 and 1.2 readings must
    agree on every plain scalar's type (a name `yes` stays a string for kubectl)."""
    return [_value(doc, name) if doc is not None else None for doc in yaml.compose_all(text, Loader=_Loader)]


# k8s.io/apimachinery/pkg/util/validation/validation.go: IsDNS1123Label, IsDNS1123Subdomain,
# IsQualifiedName (label keys), IsValidLabelValue.
DNS1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
LABEL_NAMED = {"Namespace", "Service"}  # kinds whose names must be DNS-1123 labels (at most 63 characters)


def check_object(name: str, doc) -> None:
    """What the API server checks of every object's metadata and kubernetes-validate does not."""
    if not isinstance(doc, dict) or "kind" not in doc or doc["kind"] == "Kustomization":
        return  # chart values, and kustomize's own file (no object of the API server)
    assert isinstance(doc.get("apiVersion"), str) and isinstance(doc["kind"], str), f"{name}: apiVersion/kind"
    meta = doc.get("metadata") or {}
    obj = meta.get("name")
    assert isinstance(obj, str), f"{name}: metadata.name is {obj!r}, not a string"
    if doc["kind"] in LABEL_NAMED:
        assert DNS1123_LABEL.fullmatch(obj) and len(obj) <= 63, f"{name}: {doc['kind']} name {obj!r} is no DNS-1123 label"
    else:
        assert DNS1123_SUBDOMAIN.fullmatch(obj) and len(obj) <= 253, f"{name}: name {obj!r} is no DNS-1123 subdomain"
    for where in (meta, (doc.get("spec") or {}).get("template", {}).get("metadata", {})
                  if isinstance(doc.get("spec"), dict) else {}):
        for key, value in (where.get("labels") or {}).items():
            assert isinstance(key, str) and isinstance(value, str), f"{name}: label {key!r}: {value!r} is not text"
            prefix, _, local = key.rpartition("/")
            assert QUALIFIED_NAME.fullmatch(local) and len(local) <= 63, f"{name}: label key {key!r}"
            assert not prefix or (DNS1123_SUBDOMAIN.fullmatch(prefix) and len(prefix) <= 253), f"{name}: label key {key!r}"
            assert LABEL_VALUE.fullmatch(value) and len(value) <= 63, f"{name}: label value {value!r} of {key!r}"


# --- Slurm ------------------------------------------------------------------------------------------

# The keys fleetform writes on each kind of line, from slurm.conf(5), gres.conf(5), topology.conf(5)
# and cgroup.conf(5) of Slurm 22.05: a key outside these is a word the structure split off.
LINE_KEYS = {
    "NodeName": {"NodeName", "CPUs", "Sockets", "CoresPerSocket", "ThreadsPerCore", "RealMemory", "MemSpecLimit",
                 "Gres", "Features", "Weight", "State", "NodeAddr", "Name", "Type", "File"},
    "PartitionName": {"PartitionName", "Nodes", "Default", "MaxTime", "PriorityTier", "State"},
    "SwitchName": {"SwitchName", "Nodes", "Switches"},
    # slurm.conf(5), NODESET CONFIGURATION: NodeSet, Feature, Nodes (a Slinky fleet's slurm.conf)
    "NodeSet": {"NodeSet", "Feature", "Nodes"},
}


def slurm_words(line: str) -> list[str]:
    """The words of one line as Slurm's parser splits them: comment cut at an unescaped `#`,
    whitespace-separated, double quotes keep spaces and are removed."""
    out, word, quoted, i, started = [], [], False, 0, False
    while i < len(line):
        c = line[i]
        if c == "\\" and i + 1 < len(line) and line[i + 1] == "#":
            word.append("#")
            started = True
            i += 2
            continue
        if c == "#" and not quoted:
            break
        if c == '"':
            quoted = not quoted
            started = True
        elif c.isspace() and not quoted:
            if started:
                out.append("".join(word))
            word, started = [], False
        else:
            word.append(c)
            started = True
        i += 1
    assert not quoted, f"unclosed double quote in {line!r}"
    if started:
        out.append("".join(word))
    return out


def read_slurm(name: str, text: str) -> list[tuple[tuple[str, str], ...]]:
    """Every non-empty line as (key, value) pairs; a word that is no `Key=Value` fails."""
    lines = []
    for number, line in enumerate(text.split("\n"), 1):
        words = slurm_words(line)
        if not words:
            continue
        if words[0] == "Include":  # Slurm's parser reads `Include <file>` as a directive (parse_config.c)
            assert len(words) == 2, f"{name}:{number}: an Include takes one file: {line!r}"
            lines.append((("Include", words[1]),))
            continue
        pairs = []
        for word in words:
            key, eq, value = word.partition("=")
            assert eq and re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", key), \
                f"{name}:{number}: {word!r} is no Key=Value word (line {line!r})"
            pairs.append((key, value))
        first = pairs[0][0]
        if len(pairs) > 1:
            known = LINE_KEYS.get(first)
            assert known is not None, f"{name}:{number}: several words on a {first} line: {line!r}"
            for key, _ in pairs:
                assert key in known, f"{name}:{number}: {key!r} is no key of a {first} line: {line!r}"
        lines.append(tuple(pairs))
    return lines


# The lines of a `sacctmgr load` file (sacctmgr(1) "load"; src/sacctmgr/file_functions.c splits a line
# into `Kind - 'name'` and `:`-separated Key=Value options, quotes stripped); the real sacctmgr
# loads fleetform's in tests/test_accounting_cluster.py.
SACCTMGR_LINE = re.compile(r"(Cluster|Parent|Account|User) - '([^':]+)'((?::[A-Za-z]+=(?:'[^':]*'|[^':]*))*)")


def read_sacctmgr(name: str, text: str) -> list[dict[str, str]]:
    """Every line but comments as {kind: name, option: value}; a line sacctmgr would split otherwise fails."""
    lines = []
    for number, line in enumerate(text.split("\n"), 1):
        if not line or line.startswith("#"):
            continue
        match = SACCTMGR_LINE.fullmatch(line)
        assert match, f"{name}:{number}: not a sacctmgr load line: {line!r}"
        entry = {match.group(1): match.group(2)}
        for option in filter(None, match.group(3).split(":")):
            key, _, value = option.partition("=")
            entry[key] = value.strip("'")
        lines.append(entry)
    return lines


# --- environment files ------------------------------------------------------------------------------

BASH = shutil.which("bash") or "/bin/bash"
_DUMP = r'for v in $(compgen -v); do printf "%s=%s\0" "$v" "${!v}"; done'


def source_env(text: str) -> dict[str, str]:
    """The variables that sourcing text with `set -a` in bash sets or changes, with their values."""
    return dict(_source_env(text))


@functools.lru_cache(maxsize=4096)  # the same file comes back often (a value tried in many fields): bash once
def _source_env(text: str) -> tuple:
    with tempfile.TemporaryDirectory(prefix="fuzz-env-") as tmp:
        Path(tmp, "empty").mkdir()
        Path(tmp, "vars.env").write_text(text, encoding="utf-8")
        script = f"{_DUMP}; printf '\\1\\0'; set -a; . ./vars.env 2>/dev/null; set +a; {_DUMP}"
        done = subprocess.run([BASH, "--noprofile", "--norc", "-c", script], cwd=tmp, capture_output=True,
                              timeout=20, env={"PATH": str(Path(tmp, "empty")), "LC_ALL": "C.UTF-8"})
    before_raw, _, after_raw = done.stdout.partition(b"\x01\x00")

    def parse(raw: bytes) -> dict[str, str]:
        return dict(item.decode("utf-8", "replace").split("=", 1) for item in raw.split(b"\0") if b"=" in item)

    before, after = parse(before_raw), parse(after_raw)
    volatile = {"_", "BASH_COMMAND", "BASH_LINENO", "BASH_SOURCE", "FUNCNAME", "PIPESTATUS", "RANDOM", "SECONDS",
                "SRANDOM", "EPOCHREALTIME", "EPOCHSECONDS", "BASHPID", "LINENO", "BASH_ARGC", "BASH_ARGV", "v"}
    return tuple((k, v) for k, v in after.items() if k not in volatile and before.get(k) != v)


@functools.lru_cache(maxsize=4096)
def bash_syntax(text: str) -> str:
    """bash -n's complaint about a program, empty when it parses."""
    done = subprocess.run([BASH, "-n"], input=text.encode("utf-8"), capture_output=True, timeout=20)
    return done.stderr.decode("utf-8", "replace") if done.returncode else ""


# --- every file -------------------------------------------------------------------------------------


from fleetform.render.k8s import ACCEPTANCE_PROGRAMS as K8S_PROGRAMS  # noqa: E402  (copied as they are, no values)


def read_sssd(name: str, text: str) -> dict[str, dict[str, str]]:
    """sssd.conf as sssd's ini parser reads it (ding-libs ini/ini_parse.c parser_inspect, handle_kvp,
    handle_section): a line that is empty or starts with `;` or `#` is a comment (none after a value), one
    starting with a space or tab continues the previous value (fleetform writes none: a finding), `[name]`
    opens a section, any other line is `key = value` with the spaces around `=` dropped. A key twice in a
    section is a finding (sssd refuses it)."""
    sections: dict[str, dict[str, str]] = {}
    current = None
    for number, line in enumerate(text.splitlines(), 1):
        if not line or line[0] in ";#":
            continue
        assert line[0] not in " \t", f"{name}:{number}: a continuation line {line!r}"
        if line[0] == "[":
            assert line.rstrip().endswith("]"), f"{name}:{number}: section {line!r} is not closed"
            current = line.rstrip()[1:-1].strip()
            assert current and current not in sections, f"{name}:{number}: section {line!r}"
            sections[current] = {}
            continue
        key, eq, value = line.partition("=")
        assert eq and key.strip() and current is not None, f"{name}:{number}: {line!r} is no key = value in a section"
        assert key.strip() not in sections[current], f"{name}:{number}: {key.strip()!r} twice in [{current}]"
        sections[current][key.strip()] = value.strip()
    return sections


def read_user_data(name: str, data: bytes) -> dict:
    """An EKS node group's MIME user data as nodeadm and cloud-init read it (fleetform/render/prepull.py): the
    NodeConfig parts as YAML, and the image list the shell part writes, one reference a line."""
    import email

    message = email.message_from_bytes(data)
    assert message.is_multipart(), f"{name}: not MIME multipart"
    out: dict = {"node_config": [], "images": []}
    for part in message.get_payload():
        body = part.get_payload()
        if part.get_content_type() == "application/node.eks.aws":
            out["node_config"] += read_yaml(name, body)
        else:
            assert part.get_content_type() == "text/x-shellscript", f"{name}: part {part.get_content_type()}"
            block = body.split("<<'FLEETFORM_IMAGES'\n", 1)[1].split("\nFLEETFORM_IMAGES\n", 1)[0]
            out["images"] = [_docker_short(ref) for ref in block.splitlines()]
    return out


def _docker_short(ref: str) -> str:
    """A reference as `ctr` takes it (docker.io/..., docker.io/library/... for a one-part name) in the short form the
    blueprint names the same image with: the round trip compares what the user wrote, and the one-part and two-part
    Docker Hub names gain different prefixes (prepull.ctr_reference)."""
    for prefix in ("docker.io/library/", "docker.io/"):
        if ref.startswith(prefix) and (prefix.endswith("library/") or "/" in ref[len(prefix):]):
            return ref[len(prefix):]
    return ref


def read_files(files: dict[str, bytes]) -> dict[str, object]:
    """Each rendered file read as its consumer reads it; fails (AssertionError or the parser's error)
    on a file the consumer would not take. Files that are fleetform's programs copied as they are
    (bin/, no render-time value) are checked once by tests/test_slurm_programs.py and skipped here."""
    read: dict[str, object] = {}
    for name, data in files.items():
        text = data.decode("utf-8")
        if "/bin/" in name and not name.endswith(".json"):
            continue
        if name.rsplit("/", 1)[-1] in K8S_PROGRAMS:  # <fleet>/acceptance/accept-models: tests/test_acceptance_models.py
            continue
        found = [d for d in plaintext.DELIMITERS if d in text]
        assert not found, f"{name}: template delimiters {found} in a rendered file"
        if name.endswith((".yaml", ".yml")):
            docs = read_yaml(name, text)
            for doc in docs:
                check_object(name, doc)
                # a ConfigMap's YAML file is read by its program as YAML (the semantic router's config.yaml):
                # its values read back from that reading, not from the file's text
                if isinstance(doc, dict) and doc.get("kind") == "ConfigMap":
                    for key, value in (doc.get("data") or {}).items():
                        if key.endswith((".yaml", ".yml")) and isinstance(value, str):
                            doc["data"][key] = read_yaml(f"{name}:{key}", value)
            read[name] = docs
        elif name.endswith(".json"):
            read[name] = json.loads(text)
        elif name.endswith("/slinky/sssd.conf"):
            read[name] = read_sssd(name, text)
        elif name.endswith(".conf"):  # each line's values as lists (fleetform sorts some: compare them as sets)
            read[name] = [{k: sorted(v.split(",")) for k, v in line} for line in read_slurm(name, text)]
        elif name.endswith(".env"):
            read[name] = source_env(text)
        elif name.endswith("/accounts.cfg"):
            read[name] = read_sacctmgr(name, text)
        elif name.endswith("/node/user-data"):
            read[name] = read_user_data(name, data)
        else:
            raise AssertionError(f"{name}: no reader for this kind of file; add one")
    return read


def leaves(value, path=()):
    """(path of keys, with list positions left out, and the typed leaf) of every scalar: order-free."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from leaves(item, path + (typed(key),))
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from leaves(item, path)
    else:
        yield path, typed(value)


def swap(item, old: str, new: str):
    if isinstance(item, tuple) and len(item) == 2 and item[0] == "str" and isinstance(item[1], str):
        return ("str", item[1].replace(old, new))
    if isinstance(item, tuple):
        return tuple(swap(x, old, new) for x in item)
    if isinstance(item, str):
        return item.replace(old, new)
    return item


def round_trip(mutant: dict[str, object], twin: dict[str, object], inert: str, value: str) -> int:
    """Every string of the twin's files that holds the inert word reads back, from the mutant's files,
    with the mutant's string in its place and as a string. Returns how many strings were compared."""
    from collections import Counter

    compared = 0
    for name, content in twin.items():
        target = name.replace(inert, value)
        assert target in mutant, f"the twin's {name} has no counterpart {target!r}"
        theirs = Counter(leaves(mutant[target]))
        their_paths = Counter(path for path, _ in theirs.elements())
        for path, leaf in leaves(content):
            if inert in repr(leaf):  # a value holding the word: the same value, the string in its place
                expected = (swap(path, inert, value), swap(leaf, inert, value))
                assert theirs[expected] > 0, f"{name}: {expected} does not read back from {target}"
            elif inert in repr(path):  # a key holding it (its value may be a digest): the key
                expected = swap(path, inert, value)
                assert their_paths[expected] > 0, f"{name}: key {expected} does not read back from {target}"
            else:
                continue
            compared += 1
    return compared


def env_is_clean() -> dict[str, str]:
    """What bash sets by itself when sourcing nothing: must be nothing (a control of source_env)."""
    return source_env("")

