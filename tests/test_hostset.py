"""HostSet, the number-range form of hostlists the Slurm coverage rules use, against python-hostlist
(the reference parser) on expanded names: same names, same set operations, printed form re-reads."""

from __future__ import annotations

import random

import hostlist
import pytest

from fleetform.hostset import HostSet, overlaps


def _expression(rng: random.Random) -> str:
    items = []
    for _ in range(rng.randint(1, 3)):
        prefix = rng.choice(["n", "dgx-", "dgx-0", "node1", "a", "x-"])
        if rng.random() < 0.3:
            items.append(prefix + str(rng.randint(0, 120)).zfill(rng.choice([1, 2, 3])))
            continue
        parts = []
        for _ in range(rng.randint(1, 3)):
            width, low = rng.choice([1, 2, 3]), rng.randint(0, 120)
            high = low + rng.randint(0, 30)
            parts.append(f"{low:0{width}d}-{high:0{width}d}" if rng.random() < 0.8 else f"{low:0{width}d}")
        items.append(f"{prefix}[{','.join(parts)}]{rng.choice(['', '', 'b', 'b2'])}")
    return ",".join(items)


@pytest.mark.parametrize("seed", range(4))
def test_hostset_agrees_with_python_hostlist(seed):
    rng = random.Random(seed)
    for _ in range(300):
        a, b, c = _expression(rng), _expression(rng), _expression(rng)
        ea, eb, ec = (set(hostlist.expand_hostlist(x)) for x in (a, b, c))
        A, B, C = HostSet.parse(a), HostSet.parse(b), HostSet.parse(c)
        assert set(A.names()) == ea and len(A) == len(ea), a
        assert set((A - B).names()) == ea - eb, (a, b)
        assert set((A & B).names()) == ea & eb, (a, b)
        assert set((A | B).names()) == ea | eb, (a, b)
        assert set(hostlist.expand_hostlist(str(A))) == ea, (a, str(A))
        assert set(overlaps([A, B, C]).names()) == (ea & eb) | (ea & ec) | (eb & ec), (a, b, c)
        for name in sorted(ea)[:3] + ["zz", "n5", "dgx-01"]:
            assert (name in A) == (name in ea), (a, name)


def test_one_interval_stands_for_a_range_of_any_size():
    hosts = HostSet.parse("train-[000001-100000]")
    assert len(hosts.parts) == 1 and len(hosts) == 100_000
    assert str(hosts - HostSet.parse("train-[000002-099999]")) == "train-[000001,100000]"
    assert str(HostSet.parse("dgx-0[1-2],dgx-[03-04]")) == "dgx-[01-04]"  # prefix digits belong to the number
    assert str(HostSet.parse("n[8-11]")) == "n[8-9],n[10-11]"  # n9 and n10 have different widths
