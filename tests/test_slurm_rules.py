"""The mistakes slurmctld lets through: each crafted config below starts under the real slurmctld,
and fleetform's rule for it fires. The configs are the reference's, broken in one place."""

from __future__ import annotations

import os
from dataclasses import replace

import pytest

import slurmctld
from conftest import ROOT
from fleetform.pipeline import check
from fleetform.render import render
from fleetform.render.output import write
from fleetform.rules import run
from variants import VARIANTS

REFERENCE = ROOT / "blueprints/reference.yaml"


def _model():
    result = check(REFERENCE)
    return result.model, result.document


def _with_slurm(model, **changes):
    fleet = model.fleets[0]
    return replace(model, fleets=(replace(fleet, slurm=replace(fleet.slurm, **changes)),) + model.fleets[1:])


def _node(model, **changes):
    (node,) = model.fleets[0].slurm.nodes
    return (replace(node, **changes),)


def _crafted():
    model, _ = _model()
    cfg = model.fleets[0].slurm
    (gres,) = cfg.gres
    leaves = [s for s in cfg.switches if s.nodes]
    return {
        "slurm-gres-types": _with_slurm(model, gres_types=()),
        "slurm-gres-devices": _with_slurm(model, gres=(replace(gres, file="/dev/nvidia[0-3]", devices=4),)),
        "slurm-gres-devices-type": _with_slurm(model, gres=(replace(gres, type="a100"),)),
        "slurm-cpus": _with_slurm(model, nodes=_node(model, cpus=96)),
        "default-partition": _with_slurm(model, partitions=cfg.partitions + (replace(cfg.partitions[0], name="other"),)),
        "slurm-topology-cover": _with_slurm(model, switches=(replace(leaves[0], nodes="train-[001-004]"),
                                                             replace(leaves[0], name="ec2b", nodes="train-[004-006]"))),
    }


CASES = {
    "slurm-gres-types": "GresTypes does not declare 'gpu'",
    "slurm-gres-devices": "4 GPU device files",
    "slurm-gres-devices-type": "types the GPUs of train-[001-006] 'a100'",
    "slurm-cpus": "CPUs=96 but 2 x 48 x 2 = 192",
    "default-partition": "2 default partitions",
    "slurm-topology-cover": "train-004 sit under more than one switch",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_rule_fires_on_a_config_slurmctld_accepts(case, tmp_path):
    model = _crafted()[case]
    _, document = _model()
    rule_id = case.removesuffix("-type")
    findings = [f for f in run(model, document) if f.rule == rule_id]
    assert [CASES[case] in f.message for f in findings] == [True], [f.to_text() for f in findings]
    # the finding points at the fleet's scheduler (line 52 of blueprints/reference.yaml), or its topology (61)
    assert findings[0].line == (61 if case == "slurm-topology-cover" else 52)
    if not slurmctld.available():
        if os.environ.get("CI"):
            pytest.fail("slurmctld is not installed")
        pytest.skip("slurmctld is not installed here")
    write(render(model), tmp_path / "out")
    outcome = slurmctld.check(tmp_path / "out/train/slurm")
    assert outcome.ok, "\n".join(slurmctld.problems(outcome))


def test_the_reference_and_variants_pass_every_slurm_rule(tmp_path):
    for text in [REFERENCE.read_text(), *VARIANTS.values()]:
        source = tmp_path / "bp.yaml"
        source.write_text(text)
        result = check(source)
        assert not [f for f in result.findings if f.rule.startswith("slurm-") or f.rule == "default-partition"]


def _scheduler(model, **changes):
    fleet = model.fleets[0]
    scheduler = replace(fleet.scheduler, **changes)
    return replace(model, fleets=(replace(fleet, scheduler=scheduler),) + model.fleets[1:])


def _coverage_cases():
    """What slurmctld itself rejects or what the blueprint gets wrong: the coverage rules, which now
    compare number ranges instead of expanded names, must still name exactly the wrong hosts."""
    model, _ = _model()
    from fleetform.slurm import SwitchLine

    cfg = model.fleets[0].slurm
    # the reference is on AWS, whose topology.conf starts as one switch: a tree as on-prem writes it
    leaves = [SwitchLine(f"leaf0{i + 1}", f"train-[00{2 * i + 1}-00{2 * i + 2}]", None) for i in range(3)]
    spine = (SwitchLine("spine", None, "leaf[01-03]"),)
    (gres,) = cfg.gres
    (partition,) = model.fleets[0].scheduler.partitions
    return {
        "missing": ("slurm-topology-cover", _with_slurm(model, switches=tuple(leaves[:2]) + spine),
                    "no switch holds train-[005-006]"),
        "unknown": ("slurm-topology-cover",
                    _with_slurm(model, switches=tuple(leaves[:2]) + (replace(leaves[2], nodes="train-[005-007]"),) + spine),
                    "switches list train-007, which are not nodes of the fleet"),
        "twice, written another way": ("slurm-topology-cover",
                                       _with_slurm(model, switches=tuple(leaves) + (replace(leaves[0], name="x", nodes="train-00[2-3]"),) + spine),
                                       "train-[002-003] sit under more than one switch"),
        "gres for other nodes": ("slurm-gres-devices", _with_slurm(model, gres=(replace(gres, names="train-[007-012]"),)),
                                 "gres.conf has no line for nodes train-[001-006]"),
        "partition beyond the fleet": ("slurm-partition-nodes",
                                       _scheduler(model, partitions=(replace(partition, nodes="train-[004-009],train-012"),)),
                                       "partition 'gpu' lists train-[007-009,012], not nodes of fleet 'train'"),
    }


@pytest.mark.parametrize("case", sorted(_coverage_cases()))
def test_coverage_rules_name_the_wrong_hosts(case):
    rule_id, model, message = _coverage_cases()[case]
    _, document = _model()
    findings = [f for f in run(model, document) if f.rule == rule_id]
    assert [message in f.message for f in findings] == [True], [f.to_text() for f in findings]


def test_coverage_at_100000_nodes_finds_one_misplaced_node():
    """At 100,000 nodes the checks work on ranges: one node under two switches, one under none and
    one unknown name are each found and named (correctness at scale; time is benchmarks/' business)."""
    from fleetform.slurm import SwitchLine

    model, document = _model()
    model = _scheduler(model, topology=replace(model.fleets[0].scheduler.topology, nodes_per_switch=32))
    fleet = model.fleets[0]
    model = replace(model, fleets=(replace(fleet, nodes=replace(fleet.nodes, min=100_000, max=100_000)),)
                    + model.fleets[1:])
    leaves = [SwitchLine(f"leaf{i:04d}", f"train-[{1 + 32 * i:06d}-{min(32 * (i + 1), 100_000):06d}]", None)
              for i in range(3125)]
    leaves[7] = replace(leaves[7], nodes="train-[000224-000256]")  # 224 is also under leaf0006
    leaves[9] = replace(leaves[9], nodes="train-[000289-000319]")  # 320 is under no switch
    leaves[-1] = replace(leaves[-1], nodes="train-[099969-100001]")  # 100001 is not a node
    model = _with_slurm(model, all_nodes="train-[000001-100000]", switches=tuple(leaves))
    messages = sorted(f.message for f in run(model, document) if f.rule == "slurm-topology-cover")
    assert messages == ["no switch holds train-000320", "switches list train-100001, which are not nodes of the fleet",
                        "train-000224 sit under more than one switch"]
