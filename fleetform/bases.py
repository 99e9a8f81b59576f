"""Versioned bases: `extends: {name: BASE, version: X.Y.Z}` merges bases/BASE/X.Y.Z.yaml under a
blueprint, before the schema sees it.

- The pin is exact: no ranges, no "latest". An unknown version lists the versions there are.
- The blueprint overrides its base by deep merge: mappings merge key by key, lists of named items
  (fleets, storage, models, partitions...) merge item by item by name, other values are replaced.
- Bases may extend bases; a cycle is an error.
- Every value keeps the file and line it was written at, so a finding in inherited content points
  into the base file.

Bases are looked up in the `bases/` folder beside the blueprint, then in the bases fleetform ships.
The folder is the one of the file read (`source`), not of the name findings show: `fleetform diff
REV:path` reads an exported copy of the revision and names it `REV:path`, and its bases must be
the revision's own, as `validate` of that revision would find them.
"""

from __future__ import annotations

import copy
import os
import re
from importlib import resources
from pathlib import Path
from typing import Any

from .findings import Finding, Severity, format_path
from .loader import Document, LoadError, inside, load, repository

RULE = "extends"
_SEMVER = re.compile(r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$")  # ASCII digits: \d matches every script's
_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


def _roots(doc_file: str) -> list[Path]:
    """The bases/ folder beside the blueprint (as named, a symlink's own folder), then the packaged one."""
    roots = [Path(os.path.abspath(doc_file)).parent / "bases"]
    packaged = Path(str(resources.files("fleetform.blueprints"))) / "bases"
    if packaged.resolve() not in [r.resolve() for r in roots]:
        roots.append(packaged)
    return roots


def _confined(doc: Document, root: Path, candidate: Path, packaged: bool, top: Path) -> Path:
    """The real path of a base file, which must lie inside its bases folder and, for the blueprint's
    own bases, inside the blueprint's repository: a symlink leading elsewhere is an error that
    quotes nothing of what it leads to."""
    if not inside(candidate, root) or not (packaged or inside(root, top)):
        where = root if not inside(candidate, root) else top
        raise _error(doc, ("extends",), f"the base file {candidate} is a symlink that leads outside {where}",
                     "a base must be a file inside its bases folder and the blueprint's repository; "
                     "copy it in instead of linking it")
    return Path(os.path.realpath(candidate))


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


def _error(doc: Document, path: tuple, message: str, hint: str = "") -> LoadError:
    file, line, column = doc.locate(path)
    return LoadError([Finding(file, line, column, Severity.ERROR, format_path(path), message, RULE, hint)])


def _find(doc: Document, name: str, version: str, roots: list[Path], top: Path) -> Path:
    for index, root in enumerate(roots):
        candidate = root / name / f"{version}.yaml"
        if candidate.is_file() or candidate.is_symlink():
            return _confined(doc, root, candidate, index > 0, top)
    versions = sorted({p.stem for root in roots for p in (root / name).glob("*.yaml") if _SEMVER.match(p.stem)},
                      key=_version_key)
    if versions:
        raise _error(doc, ("extends", "version"), f"base '{name}' has no version {version}",
                     f"available: {', '.join(versions)}")
    names = sorted({p.name for root in roots if root.is_dir() for p in root.iterdir() if p.is_dir()})
    from difflib import get_close_matches  # imported for suggestions only

    guess = get_close_matches(name, names, n=1)
    hint = (f"did you mean '{guess[0]}'? " if guess else "") + (f"available bases: {', '.join(names)}" if names else
                                                                 "put bases in bases/<name>/<version>.yaml beside "
                                                                 "the blueprint")
    raise _error(doc, ("extends", "name"), f"no base is named '{name}'", hint)


def _with_file(doc: Document) -> tuple[dict, dict]:
    """The document's positions, each tagged with the file it was written in."""
    tag = lambda pos: pos if len(pos) > 2 else (pos[0], pos[1], doc.file)  # noqa: E731
    return ({p: tag(v) for p, v in doc.values.items()}, {p: tag(v) for p, v in doc.keys.items()})


def _named(items: Any) -> bool:
    return isinstance(items, list) and all(isinstance(i, dict) and isinstance(i.get("name"), str) for i in items)


_ITEM = {"fleets": "fleet", "storage": "storage", "models": "model", "partitions": "partition", "switches": "switch"}


class _Merge:
    def __init__(self, base: Document, child: Document):
        self.bvalues, self.bkeys = _with_file(base)
        self.cvalues, self.ckeys = _with_file(child)
        self.values: dict = {}
        self.keys: dict = {}
        self.findings: list[Finding] = []

    def _duplicates(self, items: list, path: tuple, positions: dict) -> None:
        """Merging by name keeps one item of a name: report every later item of a name used twice in one
        file (with its errors it would vanish), as `unique-names` does for a blueprint without extends."""
        what = _ITEM.get(path[-1], "item") if path else "item"
        first: dict[str, tuple] = {}
        for index, item in enumerate(items):
            where = next((positions[p] for p in (path + (index, "name"), path + (index,), path, ()) if p in positions),
                         (1, 1, ""))
            if item["name"] not in first:
                first[item["name"]] = where
                continue
            line, column, file = where
            self.findings.append(Finding(
                file, line, column, Severity.ERROR, format_path(path + (index, "name")),
                f"{what} name '{item['name']}' is used more than once in this file", "unique-names",
                f"{what} names must be unique; the first is at line {first[item['name']][0]} (merging by name "
                "would keep only one)"))

    def _copy(self, source_values: dict, source_keys: dict, src: tuple, dst: tuple) -> None:
        n = len(src)
        for table, target in ((source_values, self.values), (source_keys, self.keys)):
            for path, pos in table.items():
                if path[:n] == src:
                    target[dst + path[n:]] = pos

    def merge(self, base: Any, child: Any, bpath: tuple, cpath: tuple, out: tuple) -> Any:
        if isinstance(base, dict) and isinstance(child, dict):
            result = {}
            for key in list(base) + [k for k in child if k not in base]:
                if key in base and key in child:
                    result[key] = self.merge(base[key], child[key], bpath + (key,), cpath + (key,), out + (key,))
                    if cpath + (key,) in self.ckeys:
                        self.keys[out + (key,)] = self.ckeys[cpath + (key,)]
                elif key in base:
                    result[key] = copy.deepcopy(base[key])
                    self._copy(self.bvalues, self.bkeys, bpath + (key,), out + (key,))
                else:
                    result[key] = copy.deepcopy(child[key])
                    self._copy(self.cvalues, self.ckeys, cpath + (key,), out + (key,))
            position = self.cvalues.get(cpath) or self.bvalues.get(bpath)
            if position:
                self.values[out] = position
            return result
        if _named(base) and _named(child):
            self._duplicates(base, bpath, self.bvalues)
            self._duplicates(child, cpath, self.cvalues)
            result = []
            by_name: dict[str, int] = {}
            for i, item in enumerate(child):
                by_name.setdefault(item["name"], i)  # the first of a name merges; a later one is reported
            for i, item in enumerate(base):
                j = by_name.pop(item["name"], None)
                index = len(result)
                if j is None:
                    result.append(copy.deepcopy(item))
                    self._copy(self.bvalues, self.bkeys, bpath + (i,), out + (index,))
                else:
                    result.append(self.merge(item, child[j], bpath + (i,), cpath + (j,), out + (index,)))
            for j in sorted(by_name.values()):
                self._copy(self.cvalues, self.ckeys, cpath + (j,), out + (len(result),))
                result.append(copy.deepcopy(child[j]))
            position = self.cvalues.get(cpath) or self.bvalues.get(bpath)
            if position:
                self.values[out] = position
            return result
        self._copy(self.cvalues, self.ckeys, cpath, out)
        return copy.deepcopy(child)


def _extends(doc: Document) -> tuple[str, str] | None:
    ext = doc.data.get("extends")
    if ext is None:
        return None
    if not isinstance(ext, dict) or set(ext) != {"name", "version"}:
        raise _error(doc, ("extends",), "extends takes exactly {name, version}",
                     "e.g. `extends: {name: efa-training, version: 1.2.0}`")
    name, version = ext["name"], ext["version"]
    if not isinstance(name, str) or not _NAME.match(name):
        raise _error(doc, ("extends", "name"), f"{name!r} is not a base name", "a DNS-1123 label, e.g. efa-training")
    if not isinstance(version, str) or not _SEMVER.match(version):
        written = doc.source_text(("extends", "version"))  # `1.10`, which YAML reads as 1.1
        shown = f"{written} (a number)" if written is not None else repr(version)
        raise _error(doc, ("extends", "version"), f"{shown} is not an exact version X.Y.Z",
                     'pin one version, quoted if need be: version: "1.2.0"')
    return name, version


def _git_top(path: str) -> Path | None:
    """The git top level of a file (the nearest folder at or above it holding `.git`, a folder or a
    worktree's file), or None outside git."""
    folder = Path(os.path.abspath(path)).parent
    for candidate in (folder, *folder.parents):
        if os.path.lexists(candidate / ".git"):
            return candidate
    return None


def _namer(source: str, display: str):
    """How findings name a base file. Relative to the repository, so a CI annotation lands on the file
    and a log reads the same on every machine: the path from the blueprint's git top level, or from
    the working folder outside git. A base fleetform ships, outside both, is `fleetform:bases/NAME/X.Y.Z.yaml`.
    A blueprint read from an exported copy and shown under another name (`fleetform diff REV:path`)
    names a base beside it by the base's path from the blueprint's folder, joined to the shown name's
    folder (`HEAD:blueprints/bases/x/1.0.0.yaml` for `HEAD:blueprints/llm.yaml`)."""
    folder = os.path.realpath(os.path.dirname(os.path.abspath(source)))
    head = (display.rpartition("/")[0] + "/" if "/" in display else
            display.partition(":")[0] + ":" if ":" in display else "")
    top = _git_top(source)
    cwd = os.getcwd()
    packaged = os.path.realpath(str(resources.files("fleetform.blueprints"))) + os.sep + "bases"
    # installed (not fleetform's own checkout): a virtual environment inside the repository (`.venv/`)
    # is no file of it, and `.venv/lib/python3.11/site-packages/...` differs per machine
    installed = any(part in ("site-packages", "dist-packages") for part in Path(packaged).parts)

    def relative(path: str, root: str) -> str:
        return os.path.relpath(path, os.path.realpath(root)).replace(os.sep, "/")

    def name(path: Path) -> str:
        real = os.path.realpath(path)
        if source != display and inside(real, folder):
            return head + relative(real, folder)
        if installed and inside(real, packaged):
            return "fleetform:bases/" + relative(real, packaged)
        for root in ([top] if top is not None else [cwd]):
            if inside(real, root):
                return relative(real, root)
        if inside(real, packaged):
            return "fleetform:bases/" + relative(real, packaged)
        if inside(real, folder):  # beside a blueprint outside git and the working folder: named as it is
            return head + relative(real, folder)
        return relative(real, cwd)
    return name


def resolve(doc: Document, _chain: tuple[tuple[str, str], ...] = (), _roots_of: list[Path] | None = None,
            _top: Path | None = None, source: str | None = None, _name=None) -> Document:
    """The document with its bases merged in (raises LoadError with findings). `source` is the file
    the document was read from when findings name it otherwise (doc.file); bases are looked up
    beside it."""
    pin = _extends(doc)
    if pin is None:
        return doc
    source = source or doc.file
    roots = _roots_of or _roots(source)
    top = _top or repository(source)
    name = _name or _namer(source, doc.file)
    if pin in _chain:
        cycle = " -> ".join(f"{n} {v}" for n, v in _chain + (pin,))
        raise _error(doc, ("extends",), f"bases extend each other in a cycle: {cycle}", "break the cycle")
    path = _find(doc, *pin, roots, top)
    shown = name(path)
    try:
        base = load(path, shown)
    except OSError as err:
        raise _error(doc, ("extends",), f"cannot read base {shown or path}: {err.strerror or err}") from None
    base = resolve(base, _chain + (pin,), roots, top, str(path), name)
    merge = _Merge(base, doc)
    data = merge.merge(base.data, doc.data, (), (), ())
    if merge.findings:
        raise LoadError(sorted(merge.findings, key=Finding.sort_key))
    data["extends"] = copy.deepcopy(doc.data["extends"])
    record = {"name": pin[0], "version": pin[1], "sha256": base.sha256}
    return Document(doc.file, data, doc.sha256, merge.values, merge.keys, (record,) + base.bases,
                    {**base.written, **doc.written})
