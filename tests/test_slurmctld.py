"""Every rendered Slurm folder, of every example and of generated variants, is started by the real
slurmctld (Debian's slurm-wlm) and must reach `Running as primary controller`.

In CI (CI set), a missing slurmctld fails these tests: .ci/run installs it.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

import slurmctld
from conftest import EXAMPLES
from fleetform.pipeline import check
from fleetform.render import render
from fleetform.render.output import write
from variants import VARIANTS


@pytest.fixture(autouse=True)
def need_slurmctld():
    if not slurmctld.available():
        if os.environ.get("CI"):
            pytest.fail(f"slurmctld is not installed ({slurmctld.SLURMCTLD}); .ci/run installs Debian's slurmctld")
        pytest.skip("slurmctld is not installed here (apt-get install slurmctld); CI fails instead of skipping")


def _render(path: Path, out: Path) -> list[Path]:
    result = check(path)
    assert result.model is not None, [f.to_text() for f in result.findings]
    write(render(result.model), out)
    return sorted(p.parent for p in out.glob("*/slurm/slurm.conf"))


def _assert_starts(folder: Path) -> None:
    outcome = slurmctld.check(folder)
    assert outcome.ok, "slurmctld refused the rendered config:\n" + "\n".join(slurmctld.problems(outcome)[-10:])


def _has_slurm_fleet(path: Path) -> bool:
    """A fleet scheduled by fleetform's own Slurm (a <fleet>/slurm/ folder); Slinky fleets render
    <fleet>/slinky/, which tests/test_slinky.py starts with the registered node line."""
    fleets = yaml.safe_load(path.read_text()).get("fleets", [])
    return any((f.get("scheduler") or {}).get("type") == "slurm" for f in fleets)


SLURM_EXAMPLES = [p for p in EXAMPLES if _has_slurm_fleet(p)]


@pytest.mark.parametrize("path", SLURM_EXAMPLES, ids=lambda p: p.name)
def test_example_slurm_folders_start(path, tmp_path):
    folders = _render(path, tmp_path / "out")
    assert folders
    for folder in folders:
        _assert_starts(folder)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_variant_slurm_folders_start(name, tmp_path):
    source = tmp_path / f"{name}.yaml"
    source.write_text(VARIANTS[name])
    (folder,) = _render(source, tmp_path / "out")
    _assert_starts(folder)


def test_slurmctld_rejects_what_it_should(tmp_path):
    """The check has teeth: a partition naming an unknown node and an unknown plugin fail it."""
    (folder,) = _render(next(p for p in EXAMPLES if p.name == "reference.yaml"), tmp_path / "out")
    conf = folder / "slurm.conf"
    original = conf.read_text()
    conf.write_text(original.replace("PartitionName=gpu Nodes=train-[001-006]", "PartitionName=gpu Nodes=train-[001-009]"))
    bad_nodes = slurmctld.check(folder)
    conf.write_text(original.replace("select/cons_tres", "select/none_such"))
    bad_plugin = slurmctld.check(folder)
    assert not bad_nodes.ok and any("Invalid node names in partition" in p for p in slurmctld.problems(bad_nodes))
    assert not bad_plugin.ok and any("select/none_such" in p for p in slurmctld.problems(bad_plugin))


def test_slurmctld_refuses_the_negative_defmempergpu_the_node_memory_rule_stops(tmp_path):
    """Issue 17: `memory_gib: 1` rendered RealMemory=972 and DefMemPerGPU=-135, which slurmctld
    22.05 refuses ("DefMemPerGPU value (-135) is less than zero", then fatal). The rule stops such a
    blueprint before rendering (tests/corpus/332-node-memory.yaml); the folder here is the one the
    old fleetform wrote, made from a valid render with those two values."""
    import re

    (folder,) = _render(Path(__file__).resolve().parents[1] / "blueprints/onprem-ib.yaml", tmp_path / "out")
    conf = folder / "slurm.conf"
    text = re.sub(r"RealMemory=\d+", "RealMemory=972", re.sub(r"DefMemPerGPU=\d+", "DefMemPerGPU=-135", conf.read_text()))
    conf.write_text(text)
    assert "DefMemPerGPU value (-135) is less than zero" in "\n".join(slurmctld.problems(slurmctld.check(folder)))
    result = check(Path(__file__).resolve().parent / "corpus/332-node-memory.yaml")
    assert result.model is None and [f.rule for f in result.findings] == ["node-memory"]
