"""Golden files: the rendered output of every example (and of a few variants) is kept in
tests/golden/<name>/ and reviewed like a pull request when it changes.

Regenerate after an intended change with `FLEETFORM_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py`,
then read the diff (`git diff tests/golden`) as a reviewer would.
"""

from __future__ import annotations

import os
import shutil

import pytest

from conftest import EXAMPLES, ROOT
from fleetform.pipeline import check
from fleetform.render import render
from fleetform.render.output import compare, write
from fleetform.render.k8s import ACCEPTANCE_PROGRAMS
from fleetform.render.k8s import _program as _k8s_program
from fleetform.render.slurm import ACCEPTANCE_FILES, HEALTH_FILES, MONITORING_PROGRAMS, POOL_PROGRAMS, PROGRAMS, _program
from variants import VARIANTS

GOLDEN = ROOT / "tests/golden"
GOLDEN_VARIANTS = ("elastic", "partitions", "onprem-roce-switches", "onprem-tcp")

CASES = [pytest.param(p, id=p.stem) for p in EXAMPLES] + [pytest.param(name, id=name) for name in GOLDEN_VARIANTS]


@pytest.mark.parametrize("source", CASES)
def test_render_matches_golden(source, tmp_path):
    if isinstance(source, str):
        name = source
        source = tmp_path / f"{name}.yaml"
        source.write_text(VARIANTS[name])
    else:
        name = source.stem
    result = check(source)
    assert result.model is not None, [f.to_text() for f in result.findings]
    files = render(result.model)
    # the programs in <fleet>/slurm/bin/ are templates/slurm/bin/ as they are (their render-time
    # values are in bin/fleet.json, bin/health.json, bin/acceptance.json, bin/pool.json and bin/monitoring.json, which
    # are golden): compared there, not kept twice
    for path in [p for p in files if p.split("/")[-2:-1] == ["bin"] and p.rsplit("/", 1)[1] in PROGRAMS + HEALTH_FILES + ACCEPTANCE_FILES + POOL_PROGRAMS
                 + MONITORING_PROGRAMS]:
        assert files.pop(path) == _program(path.rsplit("/", 1)[1]), path
    for path in [p for p in files if p.split("/")[-2:-1] == ["acceptance"] and p.rsplit("/", 1)[1] in ACCEPTANCE_PROGRAMS]:
        assert files.pop(path) == _k8s_program(path.rsplit("/", 1)[1]), path
    golden = GOLDEN / name
    if os.environ.get("FLEETFORM_UPDATE_GOLDEN"):
        shutil.rmtree(golden, ignore_errors=True)
        write(files, golden)
    drift = compare(files, golden)
    assert drift.clean, (f"rendered output of {name} differs from tests/golden/{name}: stale {drift.stale}, "
                         f"missing {drift.missing}, extra {drift.extra}; if intended, regenerate "
                         "(FLEETFORM_UPDATE_GOLDEN=1) and review the diff")
