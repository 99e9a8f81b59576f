"""`pip install` of the built wheel gives a working fleetform: every command runs from a fresh
virtual environment with no source tree on its path (another cwd, no editable install), and the
wheel ships the data files inside the fleetform package and nothing with a generic name.

One venv serves the whole module (creating it and installing pulumi-aws takes most of the time):
first without the `aws` extra, then with it installed from the same local wheel.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT, run_cli

AWS_EXTRA_MODULES = ("pulumi", "pulumi_aws")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    src = tmp_path_factory.mktemp("src") / "fleetform"
    # build from a copy, so the build leaves nothing (build/, *.egg-info) in the work tree
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "__pycache__",
                                                             "rendered"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(src)],
                   check=True, capture_output=True)
    (path,) = out.glob("fleetform-*.whl")
    return path


class Venv:
    """A fresh virtual environment with the wheel installed (not editable), used from a folder that
    holds only a copy of the reference blueprint."""

    def __init__(self, root: Path, wheel: Path, work: Path):
        self.root, self.wheel, self.work = root, wheel, work
        self.python = root / "bin/python"
        subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, capture_output=True)
        self.pip("install", str(wheel))
        self.has_aws = False

    def pip(self, *args: str) -> None:
        result = subprocess.run([str(self.python), "-m", "pip", "--disable-pip-version-check", "-q", *args],
                                capture_output=True, text=True, timeout=900)
        assert result.returncode == 0, result.stderr

    def aws(self, wanted: bool) -> None:
        """Install or remove the aws extra; the tests of each state ask for it, in any order."""
        if wanted and not self.has_aws:
            self.pip("install", "--no-compile", f"fleetform[aws] @ {self.wheel.as_uri()}")
        elif not wanted and self.has_aws:
            self.pip("uninstall", "-y", "pulumi-aws", "pulumi")
        self.has_aws = wanted

    def run(self, *args: str) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "FLEETFORM_DEBUG")}
        return subprocess.run([str(self.root / "bin/fleetform"), *args], cwd=self.work, env=env,
                              capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory):
    work = tmp_path_factory.mktemp("work")
    shutil.copy(ROOT / "blueprints/reference.yaml", work / "bp.yaml")
    shutil.copy(ROOT / "blueprints/onprem-ib.yaml", work / "onprem.yaml")
    (work / "changed.yaml").write_text((work / "bp.yaml").read_text().replace(
        "    instance_type: p5.48xlarge\n    nodes: 6 ", "    instance_type: p5en.48xlarge\n    nodes: 8 ", 1))
    return Venv(tmp_path_factory.mktemp("venv") / "env", wheel, work)


@pytest.fixture
def bare(venv):
    venv.aws(False)
    return venv


@pytest.fixture
def with_aws(venv):
    venv.aws(True)
    return venv


def test_wheel_has_only_the_fleetform_package_at_top_level(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"fleetform"}
    for data in ("fleetform/blueprints/fleetform-v1.schema.json", "fleetform/blueprints/reference.yaml",
                 "fleetform/providers/aws/instances.json", "fleetform/providers/aws/gpus.json",
                 "fleetform/providers/aws/regions.json",
                 "fleetform/providers/nccl-variables.tsv", "fleetform/templates/slurm/slurm.conf.j2"):
        assert data in names


def _modules_in_source() -> set[str]:
    """Every Python module of the source tree, named as installed."""
    found = set()
    for folder, prefix in (("fleetform", "fleetform"), ("providers", "fleetform/providers"),
                           ("templates", "fleetform/templates"), ("blueprints", "fleetform/blueprints")):
        for path in (ROOT / folder).rglob("*.py"):
            found.add(f"{prefix}/{path.relative_to(ROOT / folder).as_posix()}")
    return found


def test_wheel_holds_every_module_of_the_source_tree(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert _modules_in_source() - names == set()


def test_every_fleetform_import_resolves_to_a_shipped_module(wheel):
    """What the code imports is in the wheel (fleetform.render was not, and render/plan/diff crashed)."""
    archive = zipfile.ZipFile(wheel)
    modules = [n for n in archive.namelist() if n.endswith(".py")]
    shipped = {n.removesuffix(".py").removesuffix("/__init__").replace("/", ".") for n in modules}
    for name in modules:
        package = name.removesuffix(".py").replace("/", ".")
        package = package.removesuffix(".__init__") if name.endswith("/__init__.py") else package.rpartition(".")[0]
        for node in ast.walk(ast.parse(archive.read(name))):
            if isinstance(node, ast.ImportFrom):
                base = package.rsplit(".", node.level - 1)[0] if node.level else ""
                targets = [".".join(p for p in (base, node.module) if p)]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            for target in targets:
                if target.split(".")[0] == "fleetform":
                    assert target in shipped, f"{name} imports {target}, which the wheel lacks"


def test_installed_wheel_runs_no_source_tree(bare):
    where = subprocess.run([str(bare.python), "-c", "import fleetform, sys; print(fleetform.__file__); print(sys.path)"],
                           cwd=bare.work, capture_output=True, text=True, check=True)
    assert where.stdout.startswith(str(bare.root)), where.stdout
    assert str(ROOT) not in where.stdout
    # the console script is fleetform.cli.run (flush, then exit without the interpreter's teardown)
    assert "from fleetform.cli import run\n" in (bare.root / "bin/fleetform").read_text()


def test_validate_render_schema_without_the_aws_extra(bare):
    result = bare.run("validate", "bp.yaml")
    assert (result.returncode, result.stdout.splitlines()[-1]) == (0, "1 blueprint checked, valid: 0 errors, 1 warning"), \
        result.stderr  # the reference's 512-day run on a Capacity Block [capacity-duration]
    rendered = bare.run("render", "bp.yaml", "-o", "out")
    assert rendered.returncode == 0, rendered.stderr
    assert (bare.work / "out/train/slurm/slurm.conf").read_text().startswith("# slurm.conf of training fleet train")
    assert bare.run("render", "bp.yaml", "-o", "out", "--check").returncode == 0
    schema = bare.run("schema")
    assert schema.returncode == 0 and '"fleetform/v1"' in schema.stdout
    assert bare.run("catalog", "--gpu", "L4").returncode == 0


def test_plan_and_diff_without_the_aws_extra(bare):
    """Everything that needs no Pulumi works; the resource part names the extra to install (exit 2)."""
    for modules in AWS_EXTRA_MODULES:
        assert subprocess.run([str(bare.python), "-c", f"import {modules}"], capture_output=True).returncode == 1
    plan = bare.run("plan", "bp.yaml", "-o", "planned")
    assert plan.returncode == 2, plan.stderr
    assert plan.stderr.startswith("fleetform: error: the cloud resource plan and its security policies need the "
                                  "aws extra (pulumi and pulumi_aws are not installed): pip install 'fleetform[aws]'")
    assert "Traceback" not in plan.stderr and "internal error" not in plan.stderr
    assert "\nSizing\n" in plan.stdout and "total (priced)" in plan.stdout
    assert "Cloud resources: not recorded" in plan.stdout
    assert not (bare.work / "planned").exists()  # no plan files that look whole but lack the resources
    alone = bare.run("plan", "bp.yaml", "--no-resources", "--format", "json")
    assert alone.returncode == 0, alone.stderr
    data = json.loads(alone.stdout)
    assert data["resources"] is None and data["resources_not_recorded"] == "left out (--no-resources)"
    assert [f["fleet"] for f in data["cost"]["fleets"]] == ["train", "serve", "small-models"]
    onprem = bare.run("plan", "onprem.yaml")  # nothing in a cloud: Pulumi is never needed
    assert (onprem.returncode, onprem.stderr) == (0, "")
    assert "Cloud resources: none (on-prem blueprint)" in onprem.stdout

    diff = bare.run("diff", "bp.yaml", "changed.yaml")
    assert diff.returncode == 2 and "pip install 'fleetform[aws]'" in diff.stderr, diff.stderr
    assert "~ train/slurm/slurm.conf" in diff.stdout and "train: 6 x p5.48xlarge" in diff.stdout \
        and "-> 8 x p5en.48xlarge" in diff.stdout
    assert "Cloud resources: not compared" in diff.stdout
    assert bare.run("diff", "bp.yaml", "changed.yaml", "--no-resources").returncode == 0
    assert bare.run("diff", "onprem.yaml", "onprem.yaml").returncode == 0


def test_plan_and_diff_with_the_aws_extra(with_aws):
    plan = with_aws.run("plan", "bp.yaml")
    assert plan.returncode == 0, plan.stderr
    assert "Cloud resources:" in plan.stdout and "LaunchTemplate" in plan.stdout
    diff = with_aws.run("diff", "bp.yaml", "changed.yaml")
    assert diff.returncode == 0, diff.stderr
    assert "~ train/slurm/slurm.conf" in diff.stdout and "LaunchTemplate train-nodes" in diff.stdout


def test_development_install_finds_data_from_another_cwd(tmp_path):
    assert run_cli("catalog", "--gpu", "L4", cwd=tmp_path).returncode == 0
    assert run_cli("schema", cwd=tmp_path).returncode == 0


MOCK_RUN = r'''
"""Run a blueprint repository's Pulumi program (its __main__.py, as `pulumi up` would, in its folder) under
Pulumi's mocks, with the stack config of Pulumi.dev.yaml; print the types of the resources it registers."""
import json, runpy, sys
import pulumi, yaml

registered = []

class Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args):
        registered.append(args.typ)
        return [f"{args.name}-id", {**args.inputs, "arn": "arn", "name": args.name, "bucket": args.name,
                                    "latestVersion": 1, "privateIp": "10.0.0.10", "endpoint": "https://eks.mock",
                                    "certificateAuthority": {"data": "bW9jaw=="}}]

    def call(self, args):
        return {"value": "ami-0123456789abcdef0"} if "getParameter" in args.token else {}

pulumi.runtime.set_mocks(Mocks(), project=yaml.safe_load(open("Pulumi.yaml"))["name"], stack="dev", preview=False)
config = yaml.safe_load(open("Pulumi.dev.yaml"))["config"]
config["fleetform:deployer-cidr"] = "198.51.100.7/32"  # instead of asking checkip.amazonaws.com
pulumi.runtime.set_all_config(config)

@pulumi.runtime.test
def program():
    runpy.run_path("__main__.py", run_name="__main__")

program()
json.dump({"fleetform": __import__("fleetform").__file__, "types": registered}, sys.stdout)
'''


def test_a_blueprint_repository_written_by_init_runs_the_installed_program(with_aws, tmp_path):
    """Issue 19: a blueprint repository that is not fleetform's runs `pulumi up` with fleetform installed from
    the wheel. `fleetform init` writes the repository; its __main__.py runs under Pulumi's mocks in that
    folder (no Pulumi CLI here: the engine is the mocks, as in tests/test_pulumi.py) and builds the starter's
    training fleet and EKS cluster."""
    repo = tmp_path / "our-fleets"
    result = with_aws.run("init", str(repo), "--kind", "both", "--region", "eu-west-1", "--gpu", "h100")
    assert result.returncode == 0, result.stderr
    assert (repo / "requirements.txt").read_text().splitlines()[-1] == "fleetform[aws]==0.1.0"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "AWS_REGION",
                                                            "AWS_DEFAULT_REGION")}
    run = subprocess.run([str(with_aws.python), "-c", MOCK_RUN], cwd=repo, env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    out = json.loads(run.stdout)
    assert out["fleetform"].startswith(str(with_aws.root)) and str(ROOT) not in out["fleetform"]
    types = out["types"]
    assert types.count("aws:eks/cluster:Cluster") == 1 and types.count("aws:eks/nodeGroup:NodeGroup") == 2
    assert "aws:ec2/instance:Instance" in types and "aws:ec2/launchTemplate:LaunchTemplate" in types
    assert "kubernetes:apps/v1:Deployment" in types
