"""Load a blueprint: bounded, safe YAML with the position of every key and value.

The loader builds plain Python data straight from the YAML event stream, so it can:
- keep the line and column of every value and every key (for findings);
- reject duplicate keys, recursive aliases, non-scalar keys and foreign tags;
- bound nesting depth and alias expansion (a billion-laughs file stops after a few
  thousand nodes, not a billion);
- read scalars by the YAML 1.2 core schema: `on`, `yes`, `1:00:00` and dates stay strings,
  so a Slurm time limit or a label value is never silently turned into a number or a bool.
"""

from __future__ import annotations

import copy
import errno
import os
import re
import stat
from dataclasses import field
from pathlib import Path
from typing import Any

import yaml

from .findings import Finding, Severity, describe, format_path
from .records import frozen

try:  # CPython's own SHA-256: hashlib loads OpenSSL first, ~3 ms of every `fleetform validate`
    from _sha256 import sha256 as _sha256  # Python 3.11
except ImportError:
    try:
        from _sha2 import sha256 as _sha256  # Python 3.12+
    except ImportError:
        from hashlib import sha256 as _sha256

try:  # libyaml's parser is ~10x faster; the pure-Python one gives the same events.
    from yaml.cyaml import CParser as _Parser

    _LIBYAML = True
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    from yaml import Loader as _Parser  # type: ignore[assignment]

    _LIBYAML = False

MAX_BYTES = 4 * 1024 * 1024
"""Largest blueprint accepted. The reference is 5 KiB; 200 models take about 150 KiB."""

MAX_NODES = 200_000
"""Most values a blueprint may expand to, aliases included."""

MAX_DEPTH = 64
"""Deepest nesting of mappings and sequences."""

API_VERSION = "fleetform/v1"
KIND = "Blueprint"

Path_ = tuple  # a path of keys (str) and indexes (int)

_BOOLS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_NULLS = frozenset({"~", "null", "Null", "NULL", ""})
_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_FLOAT = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
_CORE = "tag:yaml.org,2002:"


@frozen
class Document:
    """A loaded blueprint: its data and where every value and key was written (immutable, as every
    record fleetform passes between stages; bases.resolve makes a new one)."""

    file: str
    data: Any
    sha256: str
    values: dict[Path_, tuple] = field(default_factory=dict)  # (line, col), or (line, col, file) from a base
    keys: dict[Path_, tuple] = field(default_factory=dict)
    bases: tuple[dict, ...] = ()  # the versioned bases merged in: name, version, sha256, file
    written: dict[tuple, str] = field(default_factory=dict)  # (file, line, col) -> a plain number's source text

    def source_text(self, path: Path_) -> str | None:
        """How the plain number at path was written (`1.30`, which YAML reads as 1.3), or None."""
        return self.written.get(self.locate(path))

    def locate(self, path: Path_, key: bool = False) -> tuple[str, int, int]:
        """File, line and column of the value (or key) at path, or of its nearest written ancestor."""
        parts = tuple(path)
        position = None
        if key and parts in self.keys:
            position = self.keys[parts]
        while position is None and parts:
            position = self.values.get(parts)
            parts = parts[:-1]
        if position is None:
            position = self.values.get((), (1, 1))
        return (position[2] if len(position) > 2 else self.file), position[0], position[1]

    def finding(
        self,
        path: Path_,
        message: str,
        rule: str,
        hint: str = "",
        severity: Severity = Severity.ERROR,
        key: bool = False,
    ) -> Finding:
        file, line, column = self.locate(path, key=key)
        return Finding(file, line, column, severity, format_path(path), message, rule, hint)


class LoadError(Exception):
    """The file could not be read as a blueprint; findings say why."""

    def __init__(self, findings: list[Finding]):
        super().__init__("; ".join(f.to_text() for f in findings))
        self.findings = findings


class _Fatal(Exception):
    def __init__(self, line: int, column: int, message: str, rule: str, hint: str = ""):
        super().__init__(message)
        self.line, self.column, self.message, self.rule, self.hint = line, column, message, rule, hint


def _pos(mark) -> tuple[int, int]:
    return (mark.line + 1, mark.column + 1)


def _line_col(text: str, index: int) -> tuple[int, int]:
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


def _int(value: str, event) -> int:
    try:
        return int(value, 0) if value[:2] in ("0o", "0x") else int(value)
    except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits(), 4,300 by default)
        raise _Fatal(*_pos(event.start_mark), f"a number of {len(value):,} digits, longer than any field takes",
                     "yaml", "write the number the field needs") from None


def _scalar(event) -> Any:
    value, tag = event.value, event.tag
    if tag in (None, "!"):
        if not event.implicit[0]:  # quoted, or a block scalar: always a string
            return value
        if value in _NULLS:
            return None
        if value in _BOOLS:
            return _BOOLS[value]
        if _INT.match(value):
            return _int(value, event)
        if _FLOAT.match(value):
            special = value.lower().lstrip("+-") in (".inf", ".nan")
            return float(value.replace(".", "", 1) if special else value)
        return value
    if tag == _CORE + "str":
        return value
    line, column = _pos(event.start_mark)
    try:
        if tag == _CORE + "int":
            return int(value, 0) if value[:2] in ("0o", "0x") else int(value)
        if tag == _CORE + "float":
            return float(value)
        if tag == _CORE + "bool" and value in _BOOLS:
            return _BOOLS[value]
        if tag == _CORE + "null" and value in _NULLS:
            return None
    except ValueError:
        pass
    if tag.startswith(_CORE) and tag[len(_CORE):] in ("int", "float", "bool", "null"):
        raise _Fatal(line, column, f"{value!r} is not a valid !!{tag[len(_CORE):]}", "yaml",
                     "remove the tag or fix the value")
    raise _Fatal(line, column, f"unsupported YAML tag {tag!r}", "yaml",
                 "blueprints hold plain mappings, lists and scalars; remove the tag")


class _Builder:
    """Turns parser events into data and positions, enforcing the limits."""

    def __init__(self, parser, file: str):
        self.parser = parser
        self.file = file
        self.values: dict[Path_, tuple[int, int]] = {}
        self.keys: dict[Path_, tuple[int, int]] = {}
        self.anchors: dict[str, tuple[Any, int]] = {}
        self.open_anchors: set[str] = set()
        self.nodes = 0  # values built so far: those written out plus those aliases repeat
        self.aliased = 0  # of which aliases repeated
        self.findings: list[Finding] = []
        self.written: dict[tuple, str] = {}
        self.anchor_text: dict[str, str] = {}  # an anchored plain number's source text, for its aliases

    def count(self, n: int, mark, alias: bool = False) -> None:
        self.nodes += n
        if alias:
            self.aliased += n
        if self.nodes > MAX_NODES:
            line, column = _pos(mark)
            written = self.nodes - self.aliased
            measured = f"{written:,} written out and {self.aliased:,} repeated by aliases, by line {line}"
            if self.aliased > written:
                raise _Fatal(line, column, f"aliases expand the document to more than {MAX_NODES:,} values "
                             f"({measured})", "yaml-size",
                             "aliases nested in aliases multiply (a YAML bomb?); write the values out or use fewer aliases")
            raise _Fatal(line, column, f"the document holds more than {MAX_NODES:,} values ({measured})", "yaml-size",
                         "a blueprint has hundreds of values, not hundreds of thousands; split the fleets across "
                         "several blueprints")

    def build(self) -> tuple[Any, bool]:
        """Return (data, empty)."""
        get = self.parser.get_event
        get()  # StreamStart
        event = get()
        if isinstance(event, yaml.StreamEndEvent):
            return None, True
        data = self.node(get(), (), 0)
        get()  # DocumentEnd
        event = self.parser.peek_event()
        if isinstance(event, yaml.DocumentStartEvent):
            line, column = _pos(event.start_mark)
            raise _Fatal(line, column, "the file holds several YAML documents", "yaml-documents",
                         "a blueprint is one document: remove the '---' and what follows, or split the file")
        return data, False

    def node(self, event, path: Path_, depth: int) -> Any:
        """Build the value that starts with event, placed at path."""
        if isinstance(event, yaml.AliasEvent):
            return self.alias(event)
        self.values[path] = _pos(event.start_mark)
        self.count(1, event.start_mark)
        anchor = getattr(event, "anchor", None)
        if isinstance(event, yaml.ScalarEvent):
            value = _scalar(event)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and event.implicit[0]:
                self.written[(self.file, *self.values[path])] = event.value  # a hint quotes it as written
                if anchor:
                    self.anchor_text[anchor] = event.value
            elif anchor:
                self.anchor_text.pop(anchor, None)  # a redefined anchor
            if anchor:
                self.anchors[anchor] = (value, 1)
            return value
        if depth >= MAX_DEPTH:
            line, column = _pos(event.start_mark)
            raise _Fatal(line, column, f"nesting deeper than {MAX_DEPTH} levels", "yaml-size",
                         "a blueprint needs a handful of levels; flatten the structure")
        tag = event.tag
        if tag not in (None, "!", _CORE + "map", _CORE + "seq"):
            line, column = _pos(event.start_mark)
            raise _Fatal(line, column, f"unsupported YAML tag {tag!r}", "yaml",
                         "blueprints hold plain mappings, lists and scalars; remove the tag")
        if anchor:
            self.open_anchors.add(anchor)
        start = self.nodes
        if isinstance(event, yaml.SequenceStartEvent):
            value = self.sequence(path, depth)
        else:
            value = self.mapping(path, depth)
        if anchor:
            self.open_anchors.discard(anchor)
            self.anchors[anchor] = (value, self.nodes - start + 1)
        return value

    def alias(self, event) -> Any:
        name = event.anchor
        line, column = _pos(event.start_mark)
        if name in self.open_anchors:
            raise _Fatal(line, column, f"alias *{name} refers to a node that contains it", "yaml",
                         "recursive aliases are not allowed in a blueprint")
        if name not in self.anchors:
            raise _Fatal(line, column, f"alias *{name} names no anchor defined before it", "yaml",
                         f"define &{name} earlier in the file")
        value, size = self.anchors[name]
        self.count(size, event.start_mark, alias=True)
        if name in self.anchor_text and isinstance(value, (int, float)) and not isinstance(value, bool):
            # `*v` for `&v 1.30`: a hint at the alias quotes 1.30 too
            self.written[(self.file, line, column)] = self.anchor_text[name]
        return copy.deepcopy(value) if isinstance(value, (dict, list)) else value

    def sequence(self, path: Path_, depth: int) -> list:
        items: list = []
        get = self.parser.get_event
        while True:
            event = get()
            if isinstance(event, yaml.SequenceEndEvent):
                return items
            child = path + (len(items),)
            if isinstance(event, yaml.AliasEvent):
                self.values[child] = _pos(event.start_mark)
            items.append(self.node(event, child, depth + 1))

    def mapping(self, path: Path_, depth: int) -> dict:
        result: dict = {}
        merges: list[tuple[dict, tuple[int, int]]] = []
        get = self.parser.get_event
        while True:
            event = get()
            if isinstance(event, yaml.MappingEndEvent):
                break
            key_pos = _pos(event.start_mark)
            if isinstance(event, yaml.ScalarEvent):
                key = event.value
                is_merge = key == "<<" and event.implicit[0]
                if event.anchor:
                    self.anchors[event.anchor] = (key, 1)
            elif isinstance(event, yaml.AliasEvent):
                value, _ = self.anchors.get(event.anchor, (None, 0))
                if event.anchor not in self.anchors or isinstance(value, (dict, list)):
                    raise _Fatal(*key_pos, "a key must be a plain scalar", "yaml",
                                 "write the key as text, e.g. `name:`")
                key, is_merge = str(value), False
            else:
                raise _Fatal(*key_pos, "a key must be a plain scalar, not a mapping or a list", "yaml",
                             "write the key as text, e.g. `name:`")
            value_event = get()
            if is_merge:
                merges.extend(self.merge_sources(value_event, path, depth))
                continue
            child = path + (key,)
            if key in result:
                first = self.keys[child]
                self.findings.append(Finding(
                    self.file, key_pos[0], key_pos[1], Severity.ERROR, format_path(child),
                    f"duplicate key '{key}' (first written at line {first[0]})", "yaml-duplicate-key",
                    "keep one of them; YAML mappings cannot repeat a key"))
                self.node(value_event, path + (f"<duplicate {key}>",), depth + 1)
                continue
            self.keys[child] = key_pos
            if isinstance(value_event, yaml.AliasEvent):
                self.values[child] = _pos(value_event.start_mark)
            result[key] = self.node(value_event, child, depth + 1)
        for source, where in merges:  # explicit keys win; earlier merge sources win over later
            for key, value in source.items():
                if key not in result:
                    result[key] = value
                    self.keys[path + (key,)] = where
                    self.values[path + (key,)] = where
        return result

    def merge_sources(self, event, path: Path_, depth: int) -> list[tuple[dict, tuple[int, int]]]:
        where = _pos(event.start_mark)
        value = self.node(event, path + ("<<",), depth + 1)
        sources = value if isinstance(value, list) else [value]
        if not all(isinstance(s, dict) for s in sources):
            raise _Fatal(*where, "a merge key '<<' takes a mapping or a list of mappings", "yaml",
                         "merge an alias of a mapping, e.g. `<<: *defaults`")
        return [(s, where) for s in sources]


def _too_big(file: str, measured: str) -> LoadError:
    return LoadError([Finding(file, 1, 1, Severity.ERROR, "",
                              f"{measured}, more than the {MAX_BYTES:,} bytes a blueprint may have",
                              "yaml-size", "split the fleets across several blueprints")])


class NotAFile(OSError):
    """The blueprint path names a FIFO, a device, a socket or a folder: refused before reading, as
    reading it could block forever (a FIFO) or never end (/dev/zero). A usage error, not a finding."""


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _regular(mode: int, path: Path) -> None:
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
        raise NotAFile(errno.EINVAL, f"it is {kind}, not a regular file; a blueprint is a YAML file", str(path))


def parse(raw: bytes, file: str) -> Document:
    """Parse blueprint bytes into a Document, or raise LoadError with findings."""

    def fail(line: int, column: int, message: str, rule: str, hint: str = "") -> LoadError:
        return LoadError([Finding(file, line, column, Severity.ERROR, "", message, rule, hint)])

    if len(raw) > MAX_BYTES:
        raise _too_big(file, f"the file is {len(raw):,} bytes")
    sha = _sha256(raw).hexdigest()
    try:
        # What the utf-8-sig codec does (drop one leading BOM), but with the error's offset into the file:
        # utf-8-sig counts from after the BOM, and importing it cost 0.2 ms of every validate.
        text = raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as err:
        prefix = raw[: err.start].decode("utf-8", errors="replace").removeprefix("\ufeff")
        line, column = _line_col(prefix, len(prefix))
        raise fail(line, column, f"the file is not UTF-8 text (byte 0x{raw[err.start]:02x} at offset {err.start})",
                   "yaml-encoding", "save the blueprint as UTF-8") from None
    builder = _Builder(_Parser(text), file)
    try:
        data, empty = builder.build()
    except _Fatal as err:
        raise LoadError(builder.findings + [Finding(file, err.line, err.column, Severity.ERROR, "",
                                                    err.message, err.rule, err.hint)]) from None
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line, column = _pos(mark) if mark else (1, 1)
        if err.problem == "exceeded maximum nesting depth":
            # libyaml 0.2.5 as PyYAML 6.0.4's wheels bundle it stops at 1,000 flow levels while its scanner looks
            # ahead for a simple key, before the builder has seen MAX_DEPTH of them: the same limit, reached first
            raise fail(line, column, f"nesting deeper than {MAX_DEPTH} levels", "yaml-size",
                       "a blueprint needs a handful of levels; flatten the structure") from None
        problem = err.problem or "invalid YAML"
        if err.context:
            problem = f"{problem} ({err.context})"
        hint = "indent with spaces, not tabs" if "\\t" in problem or "tab" in problem else \
            "check the indentation and quoting on this line and the one before"
        raise fail(line, column, f"YAML syntax error: {problem}", "yaml", hint) from None
    except yaml.reader.ReaderError as err:
        # libyaml reports a byte offset into the UTF-8 text, the pure-Python reader a character index
        prefix = text.encode("utf-8")[: err.position].decode("utf-8", "replace") if _LIBYAML else text[: err.position]
        line, column = _line_col(prefix, len(prefix))
        bad = text[len(prefix)] if len(prefix) < len(text) else ""
        name = f"U+{ord(bad):04X}" if bad else "a character"
        raise fail(line, column, f"the file holds {name}, which YAML does not allow ({err.reason})",
                   "yaml-encoding", "remove control characters; keep the blueprint plain UTF-8 text") from None
    except yaml.YAMLError as err:  # any other parser complaint still becomes a finding
        raise fail(1, 1, f"YAML error: {err}", "yaml") from None
    if builder.findings:
        raise LoadError(builder.findings)
    if empty or data is None:
        raise fail(1, 1, "the blueprint is empty", "blueprint-empty",
                   f"start with `apiVersion: {API_VERSION}` and `kind: {KIND}`; see blueprints/reference.yaml")
    if not isinstance(data, dict):
        line, column = builder.values.get((), (1, 1))
        raise fail(line, column, f"a blueprint is a mapping of fields, not {describe(data)}", "blueprint-type",
                   f"start with `apiVersion: {API_VERSION}` and `kind: {KIND}`")
    doc = Document(file, data, sha, builder.values, builder.keys, written=builder.written)
    api, kind = data.get("apiVersion"), data.get("kind")
    problems = []
    if "apiVersion" in data and api != API_VERSION:
        problems.append(doc.finding(("apiVersion",), f"unsupported apiVersion {api!r}", "api-version",
                                    f"this fleetform reads `apiVersion: {API_VERSION}`"))
    if "kind" in data and kind != KIND:
        problems.append(doc.finding(("kind",), f"unsupported kind {kind!r}", "api-version",
                                    f"a fleetform blueprint has `kind: {KIND}`"))
    if problems:
        raise LoadError(problems)
    return doc


def repository(path: str | Path) -> Path:
    """The repository of a blueprint: the nearest folder at or above the one the path names it in
    (a symlink's own folder, not its target's) that holds `.git` (a folder, or a worktree's file):
    git's top level; without one, the blueprint's own folder."""
    folder = Path(os.path.abspath(path)).parent
    for candidate in (folder, *folder.parents):
        if os.path.lexists(candidate / ".git"):
            return candidate
    return folder


def inside(path: str | Path, root: str | Path) -> bool:
    """Whether path, every symlink followed, is within root (also resolved)."""
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def contained(path: str | Path, display: str | None = None) -> Path:
    """The real path of a blueprint, refused (a finding that quotes nothing of the target) when a
    symlink leads it outside its repository: findings quote the files they point into, and a
    blueprint's findings may be posted where the target's owner never meant them to be read."""
    top = repository(path)
    if not inside(path, top):
        raise LoadError([Finding(display or str(path), 1, 1, Severity.ERROR, "",
                                 f"the file is a symlink that leads outside its repository {top}", "file-outside",
                                 "fleetform reads only files inside the blueprint's repository (its git top level, "
                                 "else its folder); copy the file in instead of linking it")])
    return Path(os.path.realpath(path))


def load(path: str | Path, display: str | None = None) -> Document:
    """Read and parse a blueprint file. OSError propagates (a usage problem, not a finding); so does
    NotAFile, for anything but a regular file, at once and without reading it. A symlink leading
    outside the blueprint's repository is a finding, before anything of its target is read."""
    path = Path(path)
    real = contained(path, display)
    _regular(os.stat(real).st_mode, path)
    # O_NONBLOCK: should the path become a FIFO between stat and open, opening it does not wait for a
    # writer; fstat then refuses it. It changes nothing for a regular file.
    fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as handle:
        size = os.fstat(fd)
        _regular(size.st_mode, path)
        raw = handle.read(MAX_BYTES + 1)
    if len(raw) > MAX_BYTES:
        measured = (f"the file is {size.st_size:,} bytes" if size.st_size > MAX_BYTES else
                    f"the file holds more than its size of {size.st_size:,} bytes says: {len(raw):,} bytes read "
                    "before fleetform stopped reading")
        raise _too_big(display or str(path), measured)
    return parse(raw, display or str(path))
