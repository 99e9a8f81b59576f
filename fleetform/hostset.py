"""Sets of host names as number ranges: `train-[001-100000]` is one interval, not 100,000 names.

The Slurm rules compare the hostlists fleetform generated (node lines, gres.conf lines, switches,
partitions): who is covered, twice, or not a node of the fleet. Expanding them costs O(nodes);
here each expression becomes, per name pattern, a sorted list of disjoint (low, high) intervals,
so the checks cost O(node groups + switches).

A name is keyed by its last run of digits: `train-004` is ("train-", 3 digits, "") number 4.
`dgx-0[1-2]` and `dgx-[01-02]` therefore give the same names, as Slurm reads them. python-hostlist
stays the reference parser: the tests compare every operation here with it on expanded names.
"""

from __future__ import annotations

import re
from bisect import bisect_right

from .records import frozen

Key = tuple[str, int, str]  # (prefix, digits of the number, suffix); digits 0: a name without digits
Interval = tuple[int, int]  # inclusive

_ITEM = re.compile(r"([^,\[]*)(?:\[([^\]]*)\])?([^,\[]*)")
_TRAILING_DIGITS = re.compile(r"(\d*)$")
_LAST_DIGITS = re.compile(r"^(.*?)(\d+)(\D*)$")
_ONE_RANGE = re.compile(r"([^,\[\]]*\D)\[(\d+)-(\d+)\]")  # `train-[001-032]`: what fleetform itself writes


def _merge(intervals: list[Interval]) -> list[Interval]:
    out: list[Interval] = []
    for low, high in sorted(intervals):
        if out and low <= out[-1][1] + 1:
            if high > out[-1][1]:
                out[-1] = (out[-1][0], high)
        else:
            out.append((low, high))
    return out


def _name_key(name: str) -> tuple[Key, int]:
    match = _LAST_DIGITS.match(name)
    if match is None:
        return (name, 0, ""), 0
    prefix, digits, suffix = match.groups()
    return (prefix, len(digits), suffix), int(digits)


@frozen
class HostSet:
    """An immutable set of host names; `parts` maps each name pattern to its merged intervals."""

    parts: tuple[tuple[Key, tuple[Interval, ...]], ...]

    @staticmethod
    def _build(groups: dict[Key, list[Interval]]) -> HostSet:
        return HostSet(tuple((key, tuple(_merge(iv))) for key, iv in sorted(groups.items()) if iv))

    @classmethod
    def parse(cls, expression: str) -> HostSet:
        """The hosts of a schema-valid hostlist expression (`a-[01-04,07],b-9`)."""
        simple = _ONE_RANGE.fullmatch(expression)
        if simple:
            prefix, low_text, high_text = simple.groups()
            low, high = int(low_text), int(high_text)
            if len(low_text) == len(high_text) and len(str(high)) <= len(low_text) and low <= high:
                return cls(((((prefix, len(low_text), ""), ((low, high),)),)))
        groups: dict[Key, list[Interval]] = {}
        for match in _ITEM.finditer(expression):
            if not match.group(0):
                continue
            head, ranges, tail = match.groups()
            if ranges is None:
                key, number = _name_key(head + tail)
                groups.setdefault(key, []).append((number, number))
                continue
            if any(c.isdigit() for c in tail):  # the bracket is not the last digit run: name by name
                for part in ranges.split(","):
                    low_text, _, high_text = part.partition("-")
                    width = len(low_text)
                    for number in range(int(low_text), int(high_text or low_text) + 1):
                        key, value = _name_key(f"{head}{number:0{width}d}{tail}")
                        groups.setdefault(key, []).append((value, value))
                continue
            lead = _TRAILING_DIGITS.search(head).group(1)  # digits of the prefix belong to the number
            prefix = head[:len(head) - len(lead)]
            for part in ranges.split(","):
                low_text, _, high_text = part.partition("-")
                low, high, width = int(low_text), int(high_text or low_text), len(low_text)
                # numbers print zero-padded to `width`; longer ones print with their own digits
                for digits in range(max(width, len(str(low))), max(width, len(str(high))) + 1):
                    first = low if digits == width else max(low, 10 ** (digits - 1))
                    last = min(high, 10 ** digits - 1)
                    if first > last:
                        continue
                    if lead:
                        shift = int(lead) * 10 ** digits
                        first, last = shift + first, shift + last
                    groups.setdefault((prefix, len(lead) + digits, tail), []).append((first, last))
        return cls._build(groups)

    @classmethod
    def of(cls, *sets: HostSet) -> HostSet:
        groups: dict[Key, list[Interval]] = {}
        for s in sets:
            for key, intervals in s.parts:
                groups.setdefault(key, []).extend(intervals)
        return cls._build(groups)

    def __len__(self) -> int:
        return sum(high - low + 1 for _, intervals in self.parts for low, high in intervals)

    def __bool__(self) -> bool:
        return bool(self.parts)

    def __or__(self, other: HostSet) -> HostSet:
        return HostSet.of(self, other)

    def __sub__(self, other: HostSet) -> HostSet:
        theirs = dict(other.parts)
        groups: dict[Key, list[Interval]] = {}
        for key, intervals in self.parts:
            cut = theirs.get(key, ())
            out, j = [], 0
            for low, high in intervals:
                while j < len(cut) and cut[j][1] < low:
                    j += 1
                k = j
                while low <= high and k < len(cut) and cut[k][0] <= high:
                    if cut[k][0] > low:
                        out.append((low, cut[k][0] - 1))
                    low = max(low, cut[k][1] + 1)
                    k += 1
                if low <= high:
                    out.append((low, high))
            groups[key] = out
        return HostSet._build(groups)

    def __and__(self, other: HostSet) -> HostSet:
        return self - (self - other)

    def __contains__(self, name: str) -> bool:
        key, number = _name_key(name)
        intervals = dict(self.parts).get(key, ())
        i = bisect_right(intervals, (number, float("inf"))) - 1
        return i >= 0 and intervals[i][0] <= number <= intervals[i][1]

    def names(self):
        """Every name, in order (for tests and small sets; this is the O(hosts) path)."""
        for (prefix, digits, suffix), intervals in self.parts:
            for low, high in intervals:
                for number in range(low, high + 1):
                    yield f"{prefix}{number:0{digits}d}{suffix}" if digits else prefix + suffix

    def __str__(self) -> str:
        """A Slurm hostlist expression of the set (`train-[001-004,007]`)."""
        items = []
        for (prefix, digits, suffix), intervals in self.parts:
            if not digits:
                items.append(prefix + suffix)
                continue
            if len(intervals) == 1 and intervals[0][0] == intervals[0][1]:
                items.append(f"{prefix}{intervals[0][0]:0{digits}d}{suffix}")
                continue
            ranges = ",".join(f"{low:0{digits}d}" if low == high else f"{low:0{digits}d}-{high:0{digits}d}"
                              for low, high in intervals)
            items.append(f"{prefix}[{ranges}]{suffix}")
        return ",".join(items)


def overlaps(sets: list[HostSet]) -> HostSet:
    """The names that are in more than one of `sets` (a sweep over sorted intervals)."""
    by_key: dict[Key, list[Interval]] = {}
    for s in sets:
        for key, intervals in s.parts:
            by_key.setdefault(key, []).extend(intervals)
    groups: dict[Key, list[Interval]] = {}
    for key, intervals in by_key.items():
        intervals.sort()
        reach = None
        for low, high in intervals:
            if reach is not None and low <= reach:
                groups.setdefault(key, []).append((low, min(high, reach)))
            reach = high if reach is None else max(reach, high)
    return HostSet._build(groups)
