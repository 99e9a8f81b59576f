"""`fleetform init`: the starter blueprint validates (no error, no warning) for every kind and GPU, the
files of a blueprint repository are written all or none, existing files are never replaced without
--force, and bad arguments are usage errors with a did-you-mean.

The output for one set of arguments is golden (tests/golden/init/): regenerate with
FLEETFORM_UPDATE_GOLDEN=1 and read the diff. The Pulumi program run from the files init writes, with
fleetform installed from a wheel, is tested in tests/test_packaging.py.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest
import yaml
from jsonschema import Draft202012Validator

from conftest import ROOT, run_cli
from fleetform import starter
from fleetform.catalog import load_catalog
from fleetform.cli import main
from fleetform.pipeline import check

GOLDEN = ROOT / "tests/golden/init"
GOLDEN_ARGS = ("--kind", "both", "--region", "us-east-1", "--gpu", "h100", "--name", "demo")
FILES = ["demo.yaml", "fleetform-v1.schema.json", "Pulumi.yaml", "Pulumi.dev.yaml", "__main__.py",
         "requirements.txt", "README.md"]

GPUS = sorted({g.family.lower() for g in load_catalog().gpus.values()}) + ["a100-40gb", "g6.12xlarge", "p5.4xlarge"]


@pytest.mark.parametrize("kind", starter.KINDS)
@pytest.mark.parametrize("gpu", GPUS)
def test_every_starter_validates_without_a_finding(kind, gpu, tmp_path):
    chosen = starter.starter(load_catalog(), kind, "eu-west-1", gpu, "fleets")
    path = tmp_path / "fleets.yaml"
    path.write_text(starter.blueprint_text(chosen))
    result = check(path)
    assert [f.to_text() for f in result.findings] == []
    assert result.model is not None
    assert [f.role for f in result.model.fleets] == {"training": ["training"], "inference": ["inference"],
                                                      "both": ["training", "inference"]}[kind]


def test_every_instance_type_of_the_catalog_makes_a_starter_without_a_finding(tmp_path):
    """--gpu may name any instance type: one without EFA trains on one node (two would all-reduce over TCP,
    efa-multinode's warning)."""
    catalog = load_catalog()
    found = {}
    for name, instance in catalog.instances.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(starter.blueprint_text(starter.starter(catalog, "both", "us-east-1", name, "fleets")))
        result = check(path)
        found.update({f"{name}: {f.to_text()}": 1 for f in result.findings})
        train = result.model.fleets[0]
        assert (train.nodes.max, train.placement) == ((2, "cluster") if instance.has_efa else (1, "none")), name
    assert list(found) == []


def test_a_gpu_name_picks_a_node_for_each_role():
    catalog = load_catalog()
    picks = {gpu: tuple(i.name for i in starter.pick_instances(catalog, gpu)) for gpu in ("h100", "L4", "h200")}
    # training: the most GPUs and EFA per node, priced on demand (p5e has no on-demand price); inference:
    # the fewest GPUs per node, the cheapest of those
    assert picks == {"h100": ("p5.48xlarge", "p5.4xlarge"), "L4": ("g6.48xlarge", "g6.xlarge"),
                     "h200": ("p5en.48xlarge", "p5en.48xlarge")}
    assert starter.pick_instances(catalog, "g5.12xlarge") == (catalog.instance("g5.12xlarge"),) * 2


def test_init_output_matches_golden(tmp_path):
    out = tmp_path / "repo"
    result = run_cli("init", str(out), *GOLDEN_ARGS)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(FILES)  # no temporary file left
    # the schema is fleetform's own, byte for byte: not kept twice in the golden folder
    assert (out / "fleetform-v1.schema.json").read_text() == run_cli("schema").stdout
    if os.environ.get("FLEETFORM_UPDATE_GOLDEN"):
        shutil.rmtree(GOLDEN, ignore_errors=True)
        GOLDEN.mkdir(parents=True)
        for name in FILES[:1] + FILES[2:]:
            shutil.copy(out / name, GOLDEN / name)
    for name in FILES[:1] + FILES[2:]:
        assert (out / name).read_text() == (GOLDEN / name).read_text(), \
            f"{name} differs from tests/golden/init/{name}; if intended, regenerate (FLEETFORM_UPDATE_GOLDEN=1)"
    assert sorted(p.name for p in GOLDEN.iterdir()) == sorted(FILES[:1] + FILES[2:])


def test_the_written_repository_fits_together(tmp_path):
    assert main(["init", str(tmp_path), *GOLDEN_ARGS]) == 0
    text = (tmp_path / "demo.yaml").read_text()
    # the $schema line names the schema file beside it, as a relative path: the YAML language server
    # reads it offline, and it accepts the blueprint
    first = text.splitlines()[0]
    assert first == "# yaml-language-server: $schema=./fleetform-v1.schema.json"
    schema = json.loads((tmp_path / first.split("=", 1)[1]).read_text())
    assert list(Draft202012Validator(schema).iter_errors(yaml.safe_load(text))) == []
    # the stack config names the blueprint and its region, the keys fleetform.pulumi_program reads
    config = yaml.safe_load((tmp_path / "Pulumi.dev.yaml").read_text())["config"]
    assert config == {"aws:region": "us-east-1", "fleetform:blueprint": "demo.yaml"}
    assert yaml.safe_load(text)["provider"]["region"] == config["aws:region"]
    program = (tmp_path / "__main__.py").read_text()
    assert "from fleetform.pulumi_program import main\n" in program and "main(Path(__file__).parent)" in program
    assert program == (ROOT / "stacks/__main__.py").read_text().replace(
        "The Pulumi program users run `pulumi up` in: fleetform's own, shipped in the package\n"
        "(fleetform/pulumi_program.py), as in every blueprint repository `fleetform init` writes.",
        "The Pulumi program: fleetform's own, shipped in the fleetform package (fleetform/pulumi_program.py).")
    from fleetform import __version__

    assert f"fleetform[aws]=={__version__}\n" in (tmp_path / "requirements.txt").read_text().splitlines(keepends=True)
    project = yaml.safe_load((tmp_path / "Pulumi.yaml").read_text())
    assert project["name"] == "demo" and project["runtime"]["name"] == "python"
    assert run_cli("validate", "demo.yaml", cwd=tmp_path).stdout.splitlines()[-1] == \
        "1 blueprint checked, valid: 0 errors, 0 warnings"


def _snapshot(folder):
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def test_existing_files_are_kept_without_force(tmp_path, capsys):
    (tmp_path / "README.md").write_text("my own readme\n")
    assert main(["init", str(tmp_path), *GOLDEN_ARGS]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'README.md'} already exists; nothing was written (--force replaces them)" in err
    assert _snapshot(tmp_path) == {"README.md": b"my own readme\n"}  # nothing else written, nothing replaced
    assert main(["init", str(tmp_path), *GOLDEN_ARGS, "--force"]) == 0
    assert sorted(_snapshot(tmp_path)) == sorted(FILES)
    assert (tmp_path / "README.md").read_text().startswith("# demo\n")


def test_a_failed_write_leaves_nothing(tmp_path, monkeypatch, capsys):
    """All or none: the fourth file cannot be written (the disk is full), so none of the three before it
    may stay, nor any temporary file."""
    import errno

    real_open = os.open
    opened = []

    def failing_open(path, flags, mode=0o777, *args, **kwargs):
        if str(path).startswith(str(tmp_path)) and flags & os.O_CREAT:
            opened.append(path)
            if len(opened) == 4:
                raise OSError(errno.EACCES, "Permission denied", path)
        return real_open(path, flags, mode, *args, **kwargs)

    monkeypatch.setattr(os, "open", failing_open)
    assert main(["init", str(tmp_path), *GOLDEN_ARGS]) == 2
    err = capsys.readouterr().err
    assert "cannot write" in err and "Permission denied; nothing was written" in err, err
    assert len(opened) == 4 and list(tmp_path.iterdir()) == []
    opened.clear()  # a folder init makes is removed again
    assert main(["init", str(tmp_path / "new"), *GOLDEN_ARGS]) == 2
    assert list(tmp_path.iterdir()) == []


def test_a_folder_in_the_way_stops_even_force(tmp_path, capsys):
    (tmp_path / "README.md").mkdir()
    assert main(["init", str(tmp_path), *GOLDEN_ARGS, "--force"]) == 2
    assert "README.md: a folder where init writes a file; nothing was written" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["README.md"]


@pytest.mark.parametrize("args, says", [
    (("--region", "us-est-1", "--gpu", "h100"), "unknown AWS region 'us-est-1'; did you mean 'us-west-1' or "
                                                "'us-east-1'?"),
    (("--region", "eu-central-1", "--gpu", "h10"), "unknown GPU or instance type 'h10'; did you mean 'h100'?"),
    (("--region", "eu-central-1", "--gpu", "p5.48xlarg"), "did you mean 'p5.48xlarge'?"),
    (("--region", "eu-central-1", "--gpu", "h100", "--name", "My_Fleets"), "--name 'My_Fleets' is not a blueprint"),
    (("--region", "eu-central-1", "--gpu", "h100", "--zone", "us-east-1a"),
     "--zone 'us-east-1a' is not an availability zone of eu-central-1"),
    (("--region", "eu-central-1", "--gpu", "h100", "--kind", "serving"), "invalid choice: 'serving'"),
])
def test_bad_arguments_are_usage_errors(args, says, tmp_path):
    result = run_cli("init", str(tmp_path / "repo"), *args)
    assert result.returncode == 2 and says in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "repo").exists()


def test_default_name_is_the_folders(tmp_path):
    folder = tmp_path / "ml-fleets"
    assert main(["init", str(folder), "--region", "us-west-2", "--gpu", "l4", "--kind", "inference"]) == 0
    assert yaml.safe_load((folder / "ml-fleets.yaml").read_text())["metadata"]["name"] == "ml-fleets"
    odd = tmp_path / "My Fleets"
    assert main(["init", str(odd), "--region", "us-west-2", "--gpu", "l4"]) == 0
    assert (odd / "fleets.yaml").exists()


def test_a_dir_that_is_a_file_or_unwritable_is_a_usage_error(tmp_path, capsys):
    (tmp_path / "taken").write_text("x")
    assert main(["init", str(tmp_path / "taken"), *GOLDEN_ARGS]) == 2
    assert f"{tmp_path / 'taken'} is not a folder" in capsys.readouterr().err
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    if os.access(locked, os.W_OK):  # root writes anywhere: a folder under a file cannot be made instead
        locked = tmp_path / "taken" / "sub"
    assert main(["init", str(locked), *GOLDEN_ARGS]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fleetform: error: cannot write ") and "nothing was written" in err, err


@pytest.mark.parametrize("gpu", ["h100", "g5.xlarge"])
def test_a_starter_plans_with_every_security_policy_met(gpu, tmp_path):
    """The starter goes through the Pulumi program under mocks (`fleetform plan`): its resources meet every
    security policy, and its rendered files render (a Slurm fleet and an EKS fleet)."""
    assert main(["init", str(tmp_path), "--region", "us-east-1", "--gpu", gpu, "--name", "p"]) == 0
    plan = run_cli("plan", "p.yaml", cwd=tmp_path)
    assert plan.returncode == 0, plan.stderr
    policies = [line for line in plan.stdout.splitlines() if line.startswith("Security policies:")]
    assert len(policies) == 1 and ", 0 violated:" in policies[0], policies
    assert run_cli("render", "p.yaml", cwd=tmp_path).returncode == 0
    assert (tmp_path / "rendered/p/train/slurm/slurm.conf").exists() and (tmp_path / "rendered/p/serve/k8s").is_dir()


def test_init_says_the_zone_and_instance_types_are_unchecked(tmp_path):
    """The default zone is REGION + 'a', which AWS maps to a different place in each account of its older
    regions (and some accounts lack it), and fleetform knows no type's zones: init says so and prints the
    AWS CLI call that lists the zones offering exactly the starter's types (the comment's call listed every
    type of every zone)."""
    result = run_cli("init", str(tmp_path / "a"), *GOLDEN_ARGS)
    call = ("aws ec2 describe-instance-type-offerings --region us-east-1 --location-type availability-zone "
            "--filters Name=instance-type,Values=p5.48xlarge,m7i.xlarge,p5.4xlarge --output text")
    check_line = next(line for line in result.stdout.splitlines()
                      if line.startswith("check: ") and "zones of" in line)
    assert "us-east-1a is a guess" in check_line and check_line.endswith(call)
    assert f"# {call}\n" in (tmp_path / "a/demo.yaml").read_text()
    given = run_cli("init", str(tmp_path / "b"), *GOLDEN_ARGS, "--zone", "us-east-1d", "--kind", "inference")
    check_line = next(line for line in given.stdout.splitlines()
                      if line.startswith("check: ") and "zones of" in line)
    assert "guess" not in check_line and check_line.endswith("Values=p5.4xlarge --output text")


@pytest.mark.parametrize("direct_url, line, portable", [
    # PEP 610's direct_url.json as pip writes it for `pip install 'fleetform[aws] @ git+https://...@v0.1.0'`
    ('{"url": "https://github.com/acme/fleetform", "vcs_info": {"vcs": "git", "requested_revision": "v0.1.0", '
     '"commit_id": "0123456789abcdef0123456789abcdef01234567"}}',
     "fleetform[aws] @ git+https://github.com/acme/fleetform@0123456789abcdef0123456789abcdef01234567", True),
    ('{"url": "https://files.example.com/fleetform-0.1.0-py3-none-any.whl", "archive_info": {}}',
     "fleetform[aws] @ https://files.example.com/fleetform-0.1.0-py3-none-any.whl", True),
    ('{"url": "file:///home/me/fleetform", "dir_info": {"editable": true}}', "fleetform[aws]==0.1.0", False),
    ('{"url": "file:///tmp/fleetform-0.1.0-py3-none-any.whl", "archive_info": {}}', "fleetform[aws]==0.1.0", False),
    (None, "fleetform[aws]==0.1.0", False),  # from an index: the version is what it has
])
def test_requirements_name_where_fleetform_was_installed_from(direct_url, line, portable, tmp_path, monkeypatch,
                                                              capsys):
    """fleetform is installed from git (README, Install), and no public index has it: requirements.txt's
    `fleetform[aws]==0.1.0` made the first `pulumi preview` fail to build its virtualenv ("No matching
    distribution found for fleetform"), and so did the starter README's first command."""
    monkeypatch.setattr(starter, "_direct_url", lambda: direct_url)
    assert main(["init", str(tmp_path), *GOLDEN_ARGS]) == 0
    assert (tmp_path / "requirements.txt").read_text().splitlines()[-1] == line
    assert "pip install -r requirements.txt" in (tmp_path / "README.md").read_text()
    warned = [w for w in capsys.readouterr().out.splitlines() if w.startswith("check: requirements.txt")]
    assert bool(warned) != portable
