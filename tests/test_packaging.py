"""`pip install .` ships the data files inside the fleetform package and nothing with a generic name."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile

import pytest

from conftest import ROOT, run_cli


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    src = tmp_path_factory.mktemp("src") / "fleetform"
    # build from a copy, so the build leaves nothing (build/, *.egg-info) in the work tree
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "__pycache__"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(src)],
                   check=True, capture_output=True)
    (path,) = out.glob("fleetform-*.whl")
    return path


def test_wheel_has_only_the_fleetform_package_at_top_level(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"fleetform"}
    for data in ("fleetform/blueprints/fleetform-v1.schema.json", "fleetform/blueprints/reference.yaml",
                 "fleetform/providers/aws/instances.json", "fleetform/providers/aws/gpus.yaml",
                 "fleetform/providers/nccl-variables.tsv", "fleetform/templates/slurm/slurm.conf.j2"):
        assert data in names


def test_installed_wheel_validates_from_anywhere(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True)
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(ROOT / "blueprints/reference.yaml", work / "bp.yaml")
    env = {**os.environ, "PYTHONPATH": str(target)}
    where = subprocess.run([sys.executable, "-c", "import fleetform; print(fleetform.__file__)"], cwd=work, env=env,
                           capture_output=True, text=True, check=True)
    assert where.stdout.startswith(str(target))
    result = subprocess.run([sys.executable, "-m", "fleetform", "validate", "bp.yaml"], cwd=work, env=env,
                            capture_output=True, text=True)
    assert (result.returncode, result.stdout) == (0, "1 blueprint valid: no errors, no warnings\n"), result.stderr
    rendered = subprocess.run([sys.executable, "-m", "fleetform", "render", "bp.yaml", "-o", "out"], cwd=work, env=env,
                              capture_output=True, text=True)
    assert rendered.returncode == 0, rendered.stderr
    assert (work / "out/train/slurm/slurm.conf").read_text().startswith("# slurm.conf of training fleet train")
    schema = subprocess.run([sys.executable, "-m", "fleetform", "schema"], cwd=work, env=env, capture_output=True,
                            text=True)
    assert schema.returncode == 0 and '"fleetform/v1"' in schema.stdout


def test_development_install_finds_data_from_another_cwd(tmp_path):
    assert run_cli("catalog", "--gpu", "L4", cwd=tmp_path).returncode == 0
    assert run_cli("schema", cwd=tmp_path).returncode == 0
