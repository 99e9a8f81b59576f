"""End to end on AWS, after `pulumi up`: the checks of tests/e2e_checks.py run on the fleet's Slurm
controller through SSM Run Command (the controller's role has AmazonSSMManagedInstanceCore): nodes
idle, a multi-node `srun`, node names resolving between nodes, a job's user refused by instance
metadata, FSx writable at the checkpoint path, and an NCCL all-reduce over EFA. It needs an AWS account and a
deployed stack; it is deselected unless asked for with `-m aws_e2e` (tests/conftest.py), so it
never runs in CI, and asked for without them it fails and says what is missing. Run it with your
AWS credentials:

    FLEETFORM_E2E_CLUSTER=<blueprint>_<stack> [FLEETFORM_E2E_FLEET=train] [FLEETFORM_E2E_NODES=2] \\
    AWS_REGION=<the blueprint's region> python -m pytest -m aws_e2e tests/test_aws_e2e.py

It starts no instance itself: `nodes-idle` waits (30 minutes at most) for the static nodes the
controller powers up. Each check's output is printed (pytest -s shows it). The checks' settings
(E2E_USER, E2E_CHECKPOINT_DIR, E2E_NCCL_TESTS, E2E_MPI, E2E_MIN_BUSBW_GBPS) are read on the controller: prefix them to the
script by exporting FLEETFORM_E2E_EXPORTS='E2E_MIN_BUSBW_GBPS=300 ...'.
"""

from __future__ import annotations

import os
import shlex
import time

import pytest

import e2e_checks

pytestmark = pytest.mark.aws_e2e

CLUSTER = os.environ.get("FLEETFORM_E2E_CLUSTER", "")
FLEET = os.environ.get("FLEETFORM_E2E_FLEET", "train")
NODES = int(os.environ.get("FLEETFORM_E2E_NODES", "2"))


@pytest.fixture(scope="module")
def controller():
    """Only reached when asked for (`-m aws_e2e`; conftest.py deselects these tests otherwise, so
    neither CI nor a plain `pytest` runs or skips them): what is missing then is the user's error."""
    if not CLUSTER:
        pytest.fail("FLEETFORM_E2E_CLUSTER (<blueprint>_<stack>) names no deployed cluster")
    import boto3

    session = boto3.Session()
    if session.get_credentials() is None:
        pytest.fail("no AWS credentials (AWS_PROFILE, AWS_ACCESS_KEY_ID, ...)")
    ec2 = session.client("ec2")
    found = [i["InstanceId"] for r in ec2.describe_instances(Filters=[
        {"Name": "tag:fleetform:cluster", "Values": [CLUSTER]}, {"Name": "tag:fleetform:fleet", "Values": [FLEET]},
        {"Name": "tag:fleetform:role", "Values": ["controller"]},
        {"Name": "instance-state-name", "Values": ["running"]}])["Reservations"] for i in r["Instances"]]
    assert len(found) == 1, f"expected one running controller of {CLUSTER}/{FLEET}, found {found}"
    return session.client("ssm"), found[0]


def run_on(ssm, instance: str, script: str, timeout: float = 2400) -> tuple[str, str, str]:
    """(status, stdout, stderr) of a script run by SSM's AWS-RunShellScript on the instance."""
    command = ssm.send_command(InstanceIds=[instance], DocumentName="AWS-RunShellScript",
                               Parameters={"commands": ["bash -s <<'FLEETFORM_E2E'\n" + script + "\nFLEETFORM_E2E"],
                                           "executionTimeout": [str(int(timeout))]},
                               TimeoutSeconds=60)["Command"]["CommandId"]
    deadline = time.monotonic() + timeout + 60
    while True:
        time.sleep(5)
        try:
            answer = ssm.get_command_invocation(CommandId=command, InstanceId=instance)
        except ssm.exceptions.InvocationDoesNotExist:
            continue
        if answer["Status"] not in ("Pending", "InProgress", "Delayed"):
            return answer["Status"], answer["StandardOutputContent"], answer["StandardErrorContent"]
        if time.monotonic() > deadline:
            return "TimedOut", answer["StandardOutputContent"], answer["StandardErrorContent"]


@pytest.mark.parametrize("check", e2e_checks.CHECKS, ids=lambda c: c.name)
def test_deployed_fleet(controller, check):
    ssm, instance = controller
    settings = [item for item in shlex.split(os.environ.get("FLEETFORM_E2E_EXPORTS", "")) if "=" in item]
    exports = "".join(f"export {shlex.quote(item)}\n" for item in settings)
    status, out, err = run_on(ssm, instance, exports + e2e_checks.script(check, NODES))
    print(f"--- {check.name} on {instance}: {status}\n{out}{err}")
    assert status == "Success", f"{check.name}: {status}\n{out}\n{err}"
