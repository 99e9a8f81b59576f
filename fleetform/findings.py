"""Findings: every problem fleetform reports, as data, and the reporters that print them.

A finding knows its file, position, JSON path, message, hint and rule id. Stages produce
findings; only the reporters at the edge of the CLI turn them into text or JSON.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from enum import Enum
from typing import Iterable, Sequence

from .records import frozen


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"

    def __str__(self) -> str:
        return self.value


@frozen
class Finding:
    file: str
    line: int
    column: int
    severity: Severity
    path: str
    message: str
    rule: str
    hint: str = ""

    def sort_key(self) -> tuple:
        return (self.file, self.line, self.column, self.path, self.rule, self.message)

    def to_text(self) -> str:
        text = self.message if not self.hint else f"{self.message}; {self.hint}"
        where = f"{self.path}: " if self.path else ""
        return f"{self.file}:{self.line}:{self.column}: {self.severity}: {where}{text} [{self.rule}]"

    def to_dict(self) -> dict:
        data = asdict(self)
        data["severity"] = self.severity.value
        return data


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def format_path(parts: Sequence[str | int]) -> str:
    """Render a path of keys and indexes as `fleets[0].scheduler.partitions[1].name`."""
    out: list[str] = []
    for part in parts:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif _IDENT.match(part):
            out.append(f".{part}" if out else part)
        else:
            out.append(f"[{json.dumps(part)}]")
    return "".join(out)


def describe(value: object) -> str:
    """How a value reads in a message: `a string '6'`, `a list`, `nothing`."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return f"a boolean ({str(value).lower()})"
    if isinstance(value, (int, float)):
        return f"a number ({value})"
    if isinstance(value, str):
        return f"a string {value!r}" if len(value) <= 60 else "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def summary_line(findings: Sequence[Finding], files: int, waived: int = 0) -> str:
    """The one summary line every command that checks blueprints ends its findings with (validate,
    render, plan, a diff whose side does not validate): `N blueprint(s) checked, valid|invalid:
    E error(s), W warning(s)`, then `(K warning(s) waived)` where waivers silenced some."""
    errors = sum(1 for f in findings if f.severity is Severity.ERROR)
    warnings = len(findings) - errors
    what = "blueprint" if files == 1 else "blueprints"
    note = f" ({waived} warning{'s' if waived != 1 else ''} waived)" if waived else ""
    e = f"{errors} error{'s' if errors != 1 else ''}"
    w = f"{warnings} warning{'s' if warnings != 1 else ''}"
    verdict = "invalid" if errors else "valid"
    return f"{files} {what} checked, {verdict}: {e}, {w}{note}"


def unique(findings: Iterable[Finding]) -> list[Finding]:
    """The findings with each repeat left out: one at the same file:line:col with the same severity,
    rule and message is the same problem, seen again (two blueprints that extend one base, a
    command that validates twice). A CI log reads each once; counts count each once."""
    return fresh(findings, set())


def fresh(findings: Iterable[Finding], seen: set[tuple]) -> list[Finding]:
    """The findings not in seen (nor repeated among themselves), which are added to it: what a command
    that reports several blueprints in turn has not printed yet."""
    out = []
    for f in findings:
        key = (f.file, f.line, f.column, f.severity, f.rule, f.message)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


MAX_PRINTED = 200
"""Findings a report prints; the rest are counted. 60,000 broken fleets once printed 180,000 lines."""


def printed(findings: Iterable[Finding]) -> tuple[list[Finding], str | None]:
    """The findings a report prints (sorted, at most MAX_PRINTED) and, when some are left out, the
    line that counts them."""
    items = sorted(unique(findings), key=Finding.sort_key)
    if len(items) <= MAX_PRINTED:
        return items, None
    rest = items[MAX_PRINTED:]
    errors = sum(1 for f in rest if f.severity is Severity.ERROR)
    return items[:MAX_PRINTED], (
        f"... and {len(rest):,} more finding{'s' if len(rest) != 1 else ''} not shown ({errors:,} "
        f"error{'s' if errors != 1 else ''}, {len(rest) - errors:,} warning{'s' if len(rest) - errors != 1 else ''}); "
        f"the first {MAX_PRINTED} are above: fix those and run again")


def report_text(findings: Iterable[Finding], files: int, waived: int = 0) -> str:
    items = sorted(unique(findings), key=Finding.sort_key)
    shown, rest = printed(items)
    lines = [f.to_text() for f in shown] + ([rest] if rest else [])
    lines.append(summary_line(items, files, waived))
    return "\n".join(lines) + "\n"


def report_json(findings: Iterable[Finding], files: int, waived: int = 0) -> str:
    items = sorted(unique(findings), key=Finding.sort_key)
    errors = sum(1 for f in items if f.severity is Severity.ERROR)
    data = {
        "findings": [f.to_dict() for f in items[:MAX_PRINTED]],
        "summary": {
            "files": files,
            "errors": errors,
            "warnings": len(items) - errors,
            "waived": waived,
            "valid": errors == 0,
            "shown": min(len(items), MAX_PRINTED),
            "not_shown": max(0, len(items) - MAX_PRINTED),
        },
    }
    return json.dumps(data, indent=2) + "\n"


def _workflow_escape(text: str, property_: bool = False) -> str:
    """GitHub Actions workflow-command escaping (actions/toolkit, command.ts): %, CR and LF always;
    ':' and ',' too inside a property."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if property_ else text


def report_github(findings: Iterable[Finding], files: int, waived: int = 0) -> str:
    """One GitHub Actions `::error`/`::warning` workflow command per finding, so a pull request shows
    each problem at its line, then the summary line for the job log."""
    items = sorted(unique(findings), key=Finding.sort_key)
    shown, rest = printed(items)
    lines = []
    for f in shown:
        props = ",".join(f"{key}={_workflow_escape(str(value), True)}" for key, value in
                         (("file", f.file), ("line", f.line), ("col", f.column), ("title", f"fleetform {f.rule}")))
        text = f.message if not f.hint else f"{f.message}; {f.hint}"
        where = f"{f.path}: " if f.path else ""
        lines.append(f"::{'error' if f.severity is Severity.ERROR else 'warning'} {props}::"
                     f"{_workflow_escape(where + text)}")
    lines += [rest] if rest else []
    lines.append(summary_line(items, files, waived))
    return "\n".join(lines) + "\n"
