"""Semantic rules: small named checks over the model, each with an id, a severity and a summary.

A rule is a function `check(blueprint, report)` registered with `@rule(...)`; it calls
`report(path, message, hint)` once per problem. The engine runs every rule, applies the
blueprint's waivers (warnings only) and turns what is left into positioned findings.

A rule runs only on a model its preconditions hold for: each rule names the rules it `needs`
(by default UNIQUE_NAMES: fleets, models, storage, partitions and switches are looked up by
name all over the model and its derived configs) and does not run when one of them reported an
error or did not run itself. So no rule ever sees input an earlier check already rejected, and a
new rule is safe from duplicate names without guarding against them itself.
"""

from __future__ import annotations

from typing import Callable, Iterator

from ..findings import Finding, Severity
from ..loader import Document
from ..model import Blueprint, Path
from ..records import frozen

Check = Callable[[Blueprint, "Reporter"], None]


@frozen
class Rule:
    id: str
    severity: Severity
    summary: str
    stage: str  # load | schema | rules | config | cluster | diff: where in the pipeline it is checked
    check: Check | None = None
    needs: tuple[str, ...] = ()  # rules whose errors mean this rule does not run


REGISTRY: dict[str, Rule] = {}
UNIQUE_NAMES = "unique-names"


def _register(r: Rule) -> None:
    if r.id in REGISTRY:
        raise RuntimeError(f"rule id {r.id!r} registered twice")
    REGISTRY[r.id] = r


def rule(id: str, severity: str, summary: str, stage: str = "rules",
         needs: tuple[str, ...] | None = None) -> Callable[[Check], Check]:
    """Register a semantic rule. Stage `config` marks a check of what fleetform derived from the
    blueprint (the Slurm config): a guard against fleetform's own mistakes that a blueprint alone
    cannot trigger, tested on crafted configs. `needs` names the rules that must have reported no
    error for this one to run (default: unique names); they must be registered before it."""

    def decorate(fn: Check) -> Check:
        wanted = (UNIQUE_NAMES,) if needs is None and id != UNIQUE_NAMES else tuple(needs or ())
        _register(Rule(id, Severity(severity), summary, stage, fn, wanted))
        return fn

    return decorate


# Checks made by the loader and the schema stage, listed so `fleetform rules` shows every id.
for _id, _summary, _stage in [
    ("yaml", "the file is well-formed YAML with plain scalars, mappings and lists", "load"),
    ("yaml-encoding", "the file is UTF-8 text without control characters", "load"),
    ("yaml-size", "the file, its nesting and its alias expansion stay within bounds", "load"),
    ("yaml-duplicate-key", "no mapping repeats a key", "load"),
    ("yaml-documents", "the file holds one YAML document", "load"),
    ("blueprint-empty", "the file is not empty", "load"),
    ("blueprint-type", "the document is a mapping", "load"),
    ("api-version", "apiVersion is fleetform/v1 and kind is Blueprint", "load"),
    ("extends", "a base is pinned to an existing exact version, and bases do not extend each other in a cycle", "load"),
    ("schema", "structure, types, enums and patterns match the JSON Schema", "schema"),
]:
    _register(Rule(_id, Severity.ERROR, _summary, _stage))

WAIVER_INVALID = "waiver-invalid"
WAIVER_UNUSED = "waiver-unused"
_register(Rule(WAIVER_INVALID, Severity.ERROR,
               "a waiver names a known warning-level rule and an existing fleet", "rules"))
_register(Rule(WAIVER_UNUSED, Severity.WARNING, "every waiver silences at least one finding", "rules"))

# Checks of a change, made by `fleetform diff` (fleetform/commands/diff.py) on the new side.
REPLACE_STATEFUL = "replace-stateful"
ROLLOUT_FIT = "rollout-fit"
_register(Rule(REPLACE_STATEFUL, Severity.ERROR, "a change replaces or deletes a stateful part (Slurm controller, "
               "state volume, file system, bucket) only where update_safety.allow_replace allows it", "diff"))
_register(Rule(ROLLOUT_FIT, Severity.ERROR, "a rolling update's spare GPUs or surge nodes fit in the capacity the "
               "fleet has (node max, reservation, Capacity Block)", "diff"))
EKS_VERSION_STEP = "eks-version-step"
_register(Rule(EKS_VERSION_STEP, Severity.ERROR, "a running EKS cluster's Kubernetes version moves up one minor "
               "version per change, never down", "diff"))


@frozen
class Issue:
    rule: Rule
    path: Path
    message: str
    hint: str
    key: bool


class Reporter:
    """What a rule calls to report a problem."""

    def __init__(self) -> None:
        self.issues: list[Issue] = []
        self.current: Rule | None = None

    def __call__(self, path: Path, message: str, hint: str = "", key: bool = False) -> None:
        assert self.current is not None
        self.issues.append(Issue(self.current, tuple(path), message, hint, key))


def did_you_mean(word: str, choices, what: str = "") -> str:
    """A hint: `did you mean 'x'?`, else the list of choices."""
    choices = sorted(str(c) for c in choices)
    from difflib import get_close_matches  # imported for suggestions only

    match = get_close_matches(word, choices, n=1, cutoff=0.6)
    if match:
        return f"did you mean '{match[0]}'?"
    if not choices:
        return ""
    shown = ", ".join(choices[:12]) + (", ..." if len(choices) > 12 else "")
    return f"{what or 'choices'}: {shown}"


def _fleet_of(bp: Blueprint, path: Path) -> str | None:
    if len(path) >= 2 and path[0] == "fleets" and isinstance(path[1], int) and path[1] < len(bp.fleets):
        return bp.fleets[path[1]].name
    return None


def run(bp: Blueprint, doc: Document) -> list[Finding]:
    """Run every semantic rule; apply waivers; return positioned findings."""
    return run_counting_waivers(bp, doc)[0]


def check_needs() -> None:
    """Every rule's needs are semantic rules that run before it (checked once every module registered)."""
    order = list(REGISTRY)
    for r in REGISTRY.values():
        for need in r.needs:
            if need not in REGISTRY or REGISTRY[need].check is None or order.index(need) > order.index(r.id):
                raise RuntimeError(f"rule {r.id!r} needs {need!r}, which is not a semantic rule registered before it")


def run_counting_waivers(bp: Blueprint, doc: Document) -> tuple[list[Finding], int]:
    """The findings, and how many warnings the blueprint's waivers silenced."""
    from . import checks  # noqa: F401  (registers the rules)

    reporter = Reporter()
    failed: set[str] = set()  # rules that reported an error or did not run
    for r in REGISTRY.values():
        if r.check is None:
            continue
        if any(need in failed for need in r.needs):
            failed.add(r.id)
            continue
        reporter.current = r
        before = len(reporter.issues)
        r.check(bp, reporter)
        if r.severity is Severity.ERROR and len(reporter.issues) > before:
            failed.add(r.id)
    skipped = {r.id for r in REGISTRY.values() if r.check is not None and r.id in failed
               and not any(i.rule is r for i in reporter.issues)}
    issues = list(reporter.issues)
    waived: set[int] = set()
    fleets = {f.name for f in bp.fleets}
    reporter.current = REGISTRY[WAIVER_INVALID]
    for w in bp.waivers:
        target = REGISTRY.get(w.rule)
        if target is None:
            reporter(w.path + ("rule",), f"no rule is named '{w.rule}'", did_you_mean(w.rule, REGISTRY, "rules"))
            continue
        if target.severity is Severity.ERROR:
            reporter(w.path + ("rule",), f"'{w.rule}' is an error-level rule and cannot be waived",
                     "fix the blueprint instead; only warnings can be waived")
            continue
        if target.id in skipped:
            continue  # the rule did not run: whether the waiver is used is not known yet
        if w.fleet is not None and w.fleet not in fleets:
            reporter(w.path + ("fleet",), f"no fleet is named '{w.fleet}'", did_you_mean(w.fleet, fleets, "fleets"))
            continue
        matched = [i for i, issue in enumerate(issues)
                   if issue.rule.id == w.rule and (w.fleet is None or _fleet_of(bp, issue.path) == w.fleet)]
        if matched:
            waived.update(matched)
        else:
            reporter.current = REGISTRY[WAIVER_UNUSED]
            elsewhere = w.fleet is not None and any(i.rule.id == w.rule for i in issues)
            if elsewhere:
                reporter(w.path + ("fleet",), f"the waiver of '{w.rule}' is scoped to fleet '{w.fleet}', "
                         "where it matches no finding; the findings it would silence are elsewhere",
                         "drop `fleet:` to waive it for the whole blueprint, or name the fleet it fires on")
            else:
                reporter(w.path, f"the waiver of '{w.rule}' matches no finding",
                         "remove it, so a future warning is not silenced unseen")
            reporter.current = REGISTRY[WAIVER_INVALID]
    return [doc.finding(i.path, i.message, i.rule.id, i.hint, i.rule.severity, key=i.key)
            for n, i in enumerate(reporter.issues) if n not in waived], len(waived)


def all_rules() -> Iterator[Rule]:
    from . import checks  # noqa: F401

    check_needs()
    yield from REGISTRY.values()


# Every rule module registers in checks' order whichever module is imported first: a rule registered before
# the rules it needs would run before them (run() goes in registration order), on a model they refuse.
from . import checks  # noqa: E402,F401
