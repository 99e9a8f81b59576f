"""The CLI contract: formats, exit codes, several files, and that validate never imports pulumi."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import AWS_TRAINING_HEAD, ROOT, run_cli

REF = "blueprints/reference.yaml"
BROKEN = AWS_TRAINING_HEAD + """    instance_type: p5.48xlarg
    nodes: 4
    capacity: {type: spot}
    scheduler: {type: slurm}
"""


def test_valid_blueprint_exits_0_with_summary():
    result = run_cli("validate", REF)
    assert (result.returncode, result.stdout, result.stderr) == (0, "1 blueprint valid: no errors, no warnings\n", "")


def test_broken_blueprint_lists_every_finding_then_summary(write):
    path = write(BROKEN)
    result = run_cli("validate", str(path))
    assert result.returncode == 1 and result.stderr == ""
    lines = result.stdout.splitlines()
    assert lines == [
        f"{path}:8:20: error: fleets[0].instance_type: 'p5.48xlarg' is not a GPU instance type in the catalog; "
        "did you mean 'p5.48xlarge'? [instance-type]",
        f"{path}:10:22: warning: fleets[0].capacity.type: spot instances can be reclaimed at two minutes' notice; "
        "this fleet writes no checkpoints, so a reclaim loses all progress; checkpoint to durable storage often "
        "(checkpoint.every_minutes), or use on-demand, a reservation or a Capacity Block [spot-training]",
        "1 blueprint checked, invalid: 1 error, 1 warning",
    ]


def test_json_format_carries_the_same_findings(write):
    path = write(BROKEN)
    text = run_cli("validate", str(path)).stdout.splitlines()[:-1]
    result = run_cli("validate", "--format", "json", str(path))
    data = json.loads(result.stdout)
    assert result.returncode == 1
    assert data["summary"] == {"files": 1, "errors": 1, "warnings": 1, "waived": 0, "valid": False}
    rebuilt = [f"{f['file']}:{f['line']}:{f['column']}: {f['severity']}: {f['path']}: {f['message']}; {f['hint']} "
               f"[{f['rule']}]" for f in data["findings"]]
    assert rebuilt == text


def test_several_files_in_one_run(write):
    path = write(BROKEN)
    result = run_cli("validate", REF, str(path), "blueprints/onprem-ib.yaml")
    assert result.returncode == 1
    assert result.stdout.splitlines()[-1] == "3 blueprints checked, invalid: 1 error, 1 warning"


def test_usage_errors_exit_2():
    missing = run_cli("validate", "no/such/file.yaml")
    assert missing.returncode == 2
    assert missing.stderr.startswith("fleetform: error: cannot read no/such/file.yaml") and "Traceback" not in missing.stderr
    assert run_cli("validate").returncode == 2
    assert run_cli("nonsense").returncode == 2
    assert run_cli("validate", "--format", "xml", REF).returncode == 2
    assert run_cli("validate", "blueprints").returncode == 2  # a directory


def test_rules_lists_id_severity_and_summary():
    data = json.loads(run_cli("rules", "--format", "json").stdout)
    ids = [r["id"] for r in data]
    assert len(ids) == len(set(ids))
    for expected in ("schema", "yaml-duplicate-key", "instance-type", "efa-multinode", "spot-training",
                     "reservation-id", "placement-zone", "size-range", "tensor-parallel", "model-fits",
                     "kv-cache-room", "autoscaler-reach", "gpu-sharing", "fsx-capacity", "k8s-version",
                     "role-scheduler", "unique-names", "storage-ref"):
        assert expected in ids
    assert all(r["severity"] in ("error", "warning") and r["summary"] for r in data)
    text = run_cli("rules").stdout.splitlines()
    assert text[0].split() == ["RULE", "SEVERITY", "STAGE", "CHECKS"] and len(text) == len(data) + 1


def test_validate_does_not_import_pulumi():
    code = ("import sys; from fleetform.cli import main; rc = main(['validate', 'blueprints/reference.yaml']); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pulumi', 'pulumi_aws', 'jinja2')))")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert result.stdout.splitlines()[-1] == "[]"


def test_render_does_not_import_pulumi(tmp_path):
    code = (f"import sys; from fleetform.cli import main; rc = main(['render', '{ROOT}/blueprints/reference.yaml']); "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'pulumi', 'pulumi_aws'}))")
    result = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert result.stdout.splitlines()[-1] == "[]"


def test_the_summary_counts_waived_warnings(write):
    path = write(BROKEN.replace("p5.48xlarg\n", "p5.48xlarge\n") + """waivers:
  - rule: spot-training
    reason: Short experiments that checkpoint every few minutes; a reclaim costs little.
""")
    result = run_cli("validate", str(path))
    assert (result.returncode, result.stdout) == (0, "1 blueprint valid: no errors, no warnings (1 warning waived)\n")
