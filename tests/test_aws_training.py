"""A training fleet on AWS as the Pulumi program records it (issue 10, Pulumi side): the controller's
lasting address, state and image; the user data that writes cluster.env and installs the checked
artifact (shellcheck-clean, and run for real against a stand-in `aws` command); FSx associations;
images a blueprint names."""

from __future__ import annotations

import base64
import io
import json
import os
import shutil
import subprocess
import tarfile

import pytest

from conftest import ROOT
from fleetform.plan import MOCK_AMI, record
from fleetform.render import manifest, render
from fleetform.render.archive import archive
from test_k8s import _rendered
from variants import VARIANTS

LT = "aws:ec2/launchTemplate:LaunchTemplate"
INSTANCE = "aws:ec2/instance:Instance"
DRA = "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation"
CONTRACT_KEYS = ["FLEETFORM_ROLE", "FLEETFORM_CLUSTER", "FLEETFORM_BLUEPRINT", "FLEETFORM_FLEET", "FLEETFORM_REGION",
                 "FLEETFORM_CONFIG_BUCKET", "FLEETFORM_CONFIG_KEY", "FLEETFORM_MUNGE_SECRET",
                 "FLEETFORM_CONTROLLER_ADDR", "FLEETFORM_LUSTRE_MOUNTS", "FLEETFORM_DNS_ZONE", "FLEETFORM_DNS_ZONE_ID"]
"""The keys of /etc/fleetform/cluster.env every node gets (CONTRACT-train.md); the controller also
gets FLEETFORM_LAUNCH_TEMPLATE and FLEETFORM_STATE_VOLUME."""


def _plan(source, tmp_path):
    model, files = _rendered(source, tmp_path)
    return model, record(model, files)


def _one(resources, type_, name):
    (found,) = [r for r in resources if r["type"] == type_ and r["name"] == name]
    return found


def _user_data(resources, controller: bool) -> str:
    if controller:
        return base64.b64decode(_one(resources, INSTANCE, "train-controller")["inputs"]["userDataBase64"]).decode()
    return base64.b64decode(_one(resources, LT, "train-nodes")["inputs"]["userData"]).decode()


def _program(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is not installed; .ci/run installs it")
        pytest.skip(f"{name} is not installed")
    return path


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return _plan(ROOT / "blueprints/reference.yaml", tmp_path_factory.mktemp("ref"))


def test_controller_keeps_its_address_state_and_image(reference):
    _, resources = reference
    controller = _one(resources, INSTANCE, "train-controller")
    inputs = controller["inputs"]
    # the image id is resolved at deploy time (an invoke of the SSM parameter), never `resolve:ssm:`
    # beside a root_block_device (terraform-provider-aws #43488), and a newer image does not replace it
    assert inputs["ami"] == MOCK_AMI and inputs["rootBlockDevice"]["encrypted"] is True
    # its address lives on a persistent interface; one interface cannot be on two instances
    assert controller["options"] == {"ignoreChanges": ["ami"], "deleteBeforeReplace": True}
    assert inputs["primaryNetworkInterface"] == {"networkInterfaceId": "train-controller-id"}
    assert "subnetId" not in inputs and "vpcSecurityGroupIds" not in inputs
    eni = _one(resources, "aws:ec2/networkInterface:NetworkInterface", "train-controller")["inputs"]
    assert eni["subnetId"] == "network-private-id" and eni["securityGroups"] == ["security-nodes-id"]
    assert inputs["metadataOptions"] == {"httpEndpoint": "enabled", "httpTokens": "required",
                                         "instanceMetadataTags": "enabled"}
    assert inputs["tags"]["Name"] == "train-controller" and inputs["tags"]["fleetform:role"] == "controller"
    # StateSaveLocation on an encrypted volume of its own, attached to whichever instance is current
    volume = _one(resources, "aws:ebs/volume:Volume", "train-controller-state")["inputs"]
    assert volume["encrypted"] is True and volume["availabilityZone"] == "us-east-1a"
    attachment = _one(resources, "aws:ec2/volumeAttachment:VolumeAttachment", "train-controller-state")["inputs"]
    # a controller being replaced is stopped before its state volume is detached (never a live
    # slurmctld's StateSaveLocation pulled away mid-write)
    assert attachment == {"deviceName": "/dev/sdf", "instanceId": "train-controller-id",
                          "volumeId": "train-controller-state-id", "stopInstanceBeforeDetaching": True}


def test_no_instance_at_deploy_time_but_the_controller(reference):
    """`pulumi up` starts no GPU instance: no Auto Scaling group, no other instance."""
    _, resources = reference
    assert [r["name"] for r in resources if r["type"] == INSTANCE] == ["train-controller"]
    assert not [r for r in resources if r["type"].startswith("aws:autoscaling/")]


def _env(user_data: str) -> dict[str, str]:
    """The cluster.env the user data writes, read the way the bootstrap reads it (sourced by bash)."""
    block = user_data.split("<<'FLEETFORM_ENV'\n", 1)[1].split("\nFLEETFORM_ENV\n", 1)[0]
    out = subprocess.run(["bash", "-c", 'set -a; eval "$1"; for k in ${!FLEETFORM_*}; do printf "%s=%s\\0" '
                          '"$k" "${!k}"; done', "-", block], capture_output=True, text=True, check=True,
                         env={"PATH": os.environ["PATH"]}).stdout
    keys = [line.split("=", 1)[0] for line in block.splitlines()]
    values = dict(item.split("=", 1) for item in out.split("\0") if item)
    assert list(values) == sorted(keys)  # nothing else, nothing lost
    return {k: values[k] for k in keys}


def test_user_data_writes_the_contract_environment(reference):
    _, resources = reference
    compute, controller = _env(_user_data(resources, False)), _env(_user_data(resources, True))
    assert list(compute) == CONTRACT_KEYS
    # the reference's train fleet runs on a Capacity Block: the keeper waits for it to be active
    assert list(controller) == CONTRACT_KEYS + ["FLEETFORM_LAUNCH_TEMPLATE", "FLEETFORM_STATE_VOLUME",
                                                "FLEETFORM_CAPACITY_BLOCK"]
    assert controller["FLEETFORM_CAPACITY_BLOCK"] == "cr-0a1b2c3d4e5f67890"
    # the nodes get the same values as the controller, less the controller's own
    assert compute == {k: v for k, v in controller.items() if k in CONTRACT_KEYS} | {"FLEETFORM_ROLE": "compute"}
    assert controller["FLEETFORM_ROLE"] == "controller"
    assert controller["FLEETFORM_CLUSTER"] == "llm-70b_plan"  # <metadata.name>_<pulumi stack>
    assert (controller["FLEETFORM_BLUEPRINT"], controller["FLEETFORM_FLEET"], controller["FLEETFORM_REGION"]) == (
        "llm-70b", "train", "us-east-1")
    assert (controller["FLEETFORM_CONFIG_BUCKET"], controller["FLEETFORM_CONFIG_KEY"]) == (
        "rendered-bucket-bucket", "fleetform/rendered.tar.gz")
    assert controller["FLEETFORM_MUNGE_SECRET"] == "arn:aws:mock:::secret/train-munge"
    assert controller["FLEETFORM_CONTROLLER_ADDR"] == "10.0.0.10"  # the persistent interface's address
    assert controller["FLEETFORM_LUSTRE_MOUNTS"] == "storage-scratch-id.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh=/fsx"
    assert controller["FLEETFORM_LAUNCH_TEMPLATE"] == "train-nodes-id"
    assert controller["FLEETFORM_STATE_VOLUME"] == "train-controller-state-id"
    assert (controller["FLEETFORM_DNS_ZONE"], controller["FLEETFORM_DNS_ZONE_ID"]) == (
        "train.llm-70b_plan.fleetform.internal", "train-names-zone-id")  # the zone's id, not its name


def test_environment_values_are_shell_quoted():
    """A value can never become shell code in cluster.env, whatever it holds."""
    from fleetform.render.jinja import render as render_template

    hostile = "a'b \"c\" $(touch /tmp/fleetform-pwned) `id` ; x=1 \\"
    text = render_template("cloud-init/user-data.sh.j2", role="compute nodes", fleet="train", blueprint="bp",
                           env=[("FLEETFORM_ROLE", "compute"), ("FLEETFORM_LUSTRE_MOUNTS", hostile),
                                ("FLEETFORM_EMPTY", "")]).decode()
    assert _env(text) == {"FLEETFORM_ROLE": "compute", "FLEETFORM_LUSTRE_MOUNTS": hostile, "FLEETFORM_EMPTY": ""}
    assert not os.path.exists("/tmp/fleetform-pwned")


@pytest.mark.parametrize("controller", [False, True], ids=["compute", "controller"])
def test_user_data_is_shellcheck_clean(reference, controller):
    shellcheck = _program("shellcheck")
    result = subprocess.run([shellcheck, "--shell=bash", "-"], input=_user_data(reference[1], controller),
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


FAKE_AWS = """#!/bin/bash
# stand-in for the AWS CLI: `s3api get-object` of the one artifact, from a local file; the first
# $FAKE_AWS_DENY calls are denied, as while a new role policy propagates
printf '%s\\n' "$*" >> "$FAKE_AWS_LOG"
if [ "$(wc -l < "$FAKE_AWS_LOG")" -le "${FAKE_AWS_DENY:-0}" ]; then
  echo "An error occurred (AccessDenied) when calling the GetObject operation: Access Denied" >&2; exit 254
fi
[ "$1 $2" = "s3api get-object" ] || { echo "unexpected aws call: $*" >&2; exit 2; }
[ "$4 $6 $8" = "us-east-1 rendered-bucket-bucket fleetform/rendered.tar.gz" ] || { echo "wrong object: $*" >&2; exit 2; }
cp "$FAKE_ARTIFACT" "$9"
"""

BOOTSTRAP = b"""#!/bin/bash
# stand-in bootstrap: records what it was started with
set -eu
. "$FLEETFORM_TEST_ROOT/etc/fleetform/cluster.env"
echo "$FLEETFORM_ROLE $FLEETFORM_CLUSTER $FLEETFORM_FLEET" > "$FLEETFORM_TEST_ROOT/bootstrapped"
"""


FAKE_SLEEP = """#!/bin/bash
# stand-in for sleep: records how long it was asked to wait, waits for nothing
printf '%s\\n' "$*" >> "$FAKE_SLEEP_LOG"
"""


def _run_user_data(reference, tmp_path, files: dict[str, bytes], tamper=None, deny: int = 0):
    """Run the compute nodes' user data for real, in a sandbox: /etc/fleetform and /opt/fleetform
    moved under tmp_path (the one test-only change to the script), `aws` a stand-in that serves the
    artifact; everything else (heredoc, quoting, tar, the manifest check, exec) runs as on a node."""
    root = tmp_path / "root"
    root.mkdir()
    script = _user_data(reference[1], False).replace("/etc/fleetform", f"{root}/etc/fleetform").replace(
        "/opt/fleetform", f"{root}/opt/fleetform")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "aws").write_text(FAKE_AWS)
    (bin_dir / "aws").chmod(0o755)
    (bin_dir / "sleep").write_text(FAKE_SLEEP)
    (bin_dir / "sleep").chmod(0o755)
    data = archive(files)
    if tamper is not None:
        data = tamper(files)
    (tmp_path / "artifact.tar.gz").write_bytes(data)
    (tmp_path / "user-data").write_text(script)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_AWS_LOG": str(tmp_path / "aws.log"),
           "FAKE_ARTIFACT": str(tmp_path / "artifact.tar.gz"), "FLEETFORM_TEST_ROOT": str(root),
           "FAKE_AWS_DENY": str(deny), "FAKE_SLEEP_LOG": str(tmp_path / "sleep.log")}
    result = subprocess.run(["bash", str(tmp_path / "user-data")], capture_output=True, text=True, env=env, timeout=60)
    return root, result


def _with_bootstrap(model) -> dict[str, bytes]:
    """The reference's rendered files with a stand-in bootstrap, the manifest made anew."""
    files = {k: v for k, v in render(model).items() if k != "manifest.json"}
    files["train/slurm/bin/bootstrap"] = BOOTSTRAP
    files["manifest.json"] = manifest(model, files)
    return files


def test_user_data_installs_the_checked_artifact_and_runs_the_bootstrap(reference, tmp_path):
    model, _ = reference
    files = _with_bootstrap(model)
    root, result = _run_user_data(reference, tmp_path, files)
    assert result.returncode == 0, result.stderr
    assert (root / "bootstrapped").read_text() == "compute llm-70b_plan train\n"
    env_file = root / "etc/fleetform/cluster.env"
    assert oct(env_file.stat().st_mode & 0o777) == "0o600"
    installed = root / "opt/fleetform/rendered"
    for path, data in files.items():
        assert (installed / path).read_bytes() == data
        assert (installed / path).stat().st_mode & 0o777 == (0o755 if data.startswith(b"#!") else 0o644)
    assert (tmp_path / "aws.log").read_text().count("s3api get-object") == 1


def test_user_data_retries_the_first_download_while_its_role_policy_propagates(reference, tmp_path):
    """IAM is eventually consistent (IAM User Guide, "Troubleshoot IAM"): the first GetObject of a
    new controller may be denied. Three denials are waited out (2, 4, 8 s) and the node boots."""
    model, _ = reference
    root, result = _run_user_data(reference, tmp_path, _with_bootstrap(model), deny=3)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "aws.log").read_text().count("s3api get-object") == 4
    assert (tmp_path / "sleep.log").read_text().split() == ["2", "4", "8"]
    assert (root / "bootstrapped").exists()


def test_user_data_gives_up_on_a_download_that_stays_denied(reference, tmp_path):
    """Bounded: 12 tries (about 4 minutes of waiting), then the user data fails and boots nothing."""
    model, _ = reference
    root, result = _run_user_data(reference, tmp_path, _with_bootstrap(model), deny=99)
    assert result.returncode != 0 and "failed 12 times, giving up" in result.stderr
    assert (tmp_path / "aws.log").read_text().count("s3api get-object") == 12
    assert [int(x) for x in (tmp_path / "sleep.log").read_text().split()] == [2, 4, 8, 16] + [30] * 7
    assert not (root / "bootstrapped").exists()


def test_user_data_apt_waits_for_the_dpkg_lock_and_retries(reference, tmp_path):
    """Every apt-get of the user data goes through apt_get (DPkg::Lock::Timeout, Acquire::Retries)
    under retry: at first boot unattended-upgrades holds the dpkg lock. The AWS CLI branch runs only
    on an image without the CLI, so its calls are checked as text and the functions run with a fake
    apt-get that fails once (a lock held past the timeout, a mirror down)."""
    script = _user_data(reference[1], True)
    calls = [line.strip() for line in script.splitlines() if "apt-get" in line and not line.lstrip().startswith("#")]
    assert calls == ['DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 -o Acquire::Retries=3 "$@"']
    uses = [line.strip() for line in script.splitlines() if "apt_get" in line and "apt_get()" not in line]
    assert len(uses) == 2 and all(line.startswith("retry apt_get ") for line in uses), uses
    functions = script[script.index("retry() {"):script.index("if ! command -v aws")]
    log = tmp_path / "apt.log"
    fake = 'apt-get() { echo "$DEBIAN_FRONTEND $*" >> "$LOG"; [ "$(wc -l < "$LOG")" -ge 2 ]; }\nsleep() { :; }\n'
    out = subprocess.run(["bash", "-c", functions + fake + "retry apt_get update -q"], capture_output=True,
                         text=True, env={"PATH": os.environ["PATH"], "LOG": str(log)}, timeout=30)
    assert out.returncode == 0, out.stderr
    assert log.read_text().splitlines() == ["noninteractive -o DPkg::Lock::Timeout=600 -o Acquire::Retries=3 update -q"] * 2


def _tampered(files):
    changed = dict(files)
    changed["train/slurm/slurm.conf"] = files["train/slurm/slurm.conf"] + b"SlurmctldHost=evil\n"
    return archive(changed)


def _with_extra(files):
    return archive({**files, "train/slurm/bin/extra": b"#!/bin/sh\n"})


@pytest.mark.parametrize("tamper, named", [(_tampered, "train/slurm/slurm.conf"), (_with_extra, "train/slurm/bin/extra")])
def test_user_data_refuses_an_artifact_that_does_not_match_its_manifest(reference, tmp_path, tamper, named):
    model, _ = reference
    root, result = _run_user_data(reference, tmp_path, _with_bootstrap(model), tamper)
    assert result.returncode != 0
    assert f"the rendered files do not match manifest.json: {named}" in result.stderr
    assert not (root / "bootstrapped").exists() and not (root / "opt/fleetform/rendered").exists()


def test_checkpoints_are_exported_to_the_checkpoint_bucket_not_the_import_prefix(reference):
    _, resources = reference
    associations = {r["name"]: r["inputs"] for r in resources if r["type"] == DRA}
    assert associations["storage-scratch-dra"]["fileSystemPath"] == "/data"  # training data, import only
    assert set(associations["storage-scratch-dra"]["s3"]) == {"autoImportPolicy"}
    export = associations["storage-scratch-export-checkpoints"]
    assert export["fileSystemPath"] == "/checkpoints"  # /fsx/checkpoints of the blueprint
    assert export["dataRepositoryPath"] == "s3://storage-checkpoints-bucket/checkpoints/"
    assert export["s3"] == {"autoExportPolicy": {"events": ["NEW", "CHANGED", "DELETED"]}}
    paths = sorted(a["fileSystemPath"] for a in associations.values())
    assert not any(b.startswith(a.rstrip("/") + "/") for a in paths for b in paths if a != b)  # no overlap


IMAGED = VARIANTS["partitions"].replace("    instance_type: p5.48xlarge\n",
                                        "    instance_type: p5.48xlarge\n    image: __IMAGE__\n")


@pytest.mark.parametrize("nodes, controller, template_image, controller_ami", [
    ("ami-0aaaaaaaaaaaaaaaa", None, "ami-0aaaaaaaaaaaaaaaa", "ami-0aaaaaaaaaaaaaaaa"),
    # an SSM parameter is resolved at deploy time for the nodes too: never `resolve:ssm:`, which EC2
    # resolves at every launch, so two nodes launched an hour apart could boot different images
    ("/acme/images/gpu/ami-id", None, MOCK_AMI, MOCK_AMI),
    ("/acme/images/gpu/ami-id", "ami-0bbbbbbbbbbbbbbbb", MOCK_AMI, "ami-0bbbbbbbbbbbbbbbb"),
])
def test_a_blueprint_names_its_own_images(tmp_path, nodes, controller, template_image, controller_ami):
    text = IMAGED.replace("__IMAGE__", nodes)
    if controller:
        text = text.replace("      type: slurm\n", f"      type: slurm\n      controller: {{image: {controller}}}\n")
    _, resources = _plan(text, tmp_path)
    assert _one(resources, LT, "train-nodes")["inputs"]["imageId"] == template_image
    assert _one(resources, INSTANCE, "train-controller")["inputs"]["ami"] == controller_ami
    policy = json.loads(_one(resources, "aws:iam/rolePolicy:RolePolicy", "train-controller")["inputs"]["policy"])
    # a launch names an AMI id: the controller needs no right on the parameter
    assert not [s for s in policy["Statement"] if "ssm:GetParameters" in str(s["Action"])]


def test_an_existing_subnet_gives_the_state_volume_its_zone(tmp_path):
    text = VARIANTS["partitions"].replace("network: {cidr: 10.0.0.0/16}",
                                          "network: {vpc_id: vpc-0a1b2c3d4e5f67890, subnet_id: subnet-0a1b2c3d4e5f67890}")
    _, resources = _plan(text, tmp_path)
    # looked up from the subnet at deploy time (under the mocks: the region's zone a)
    assert _one(resources, "aws:ebs/volume:Volume", "train-controller-state")["inputs"]["availabilityZone"] == "us-east-1a"
    assert _one(resources, "aws:ec2/networkInterface:NetworkInterface", "train-controller")["inputs"][
        "subnetId"] == "subnet-0a1b2c3d4e5f67890"


def test_the_artifact_is_what_the_user_data_installs(reference):
    """The plan's artifact holds exactly the rendered files (manifest.json included)."""
    model, resources = reference
    (obj,) = [r["inputs"] for r in resources if r["type"] == "aws:s3/bucketObjectv2:BucketObjectv2"]
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(obj["contentBase64"]))) as tar:
        assert {m.name: tar.extractfile(m).read() for m in tar.getmembers()} == render(model)


def test_a_reservation_is_targeted_without_a_placement_group_of_its_own(tmp_path):
    """`capacity: reservation` with `placement: cluster`: the launch template targets the On-Demand
    Capacity Reservation and creates no placement group. A new group beside an ODCR fails every
    launch when the ODCR is bound to another group, and may fail for placement outside the
    reservation otherwise (aws-parallelcluster ec2_validators.py, PlacementGroupCapacityReservationValidator).
    Negative control: on-demand capacity with `placement: cluster` still gets its cluster group."""
    text = (ROOT / "blueprints/reference.yaml").read_text()
    assert "      type: capacity-block " in text
    reserved = text.replace("      type: capacity-block ", "      type: reservation ", 1)
    (tmp_path / "reserved").mkdir()
    (tmp_path / "od").mkdir()
    _, resources = _plan(reserved, tmp_path / "reserved")
    template = _one(resources, LT, "train-nodes")["inputs"]
    assert template["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": "cr-0a1b2c3d4e5f67890"}}
    assert "placement" not in template and "instanceMarketOptions" not in template
    assert not [r for r in resources if r["type"] == "aws:ec2/placementGroup:PlacementGroup"]
    on_demand = "".join(line for line in text.splitlines(keepends=True) if "reservation_id: cr-0a1b" not in line)
    _, resources = _plan(on_demand.replace("      type: capacity-block ", "      type: on-demand ", 1), tmp_path / "od")
    (group,) = [r for r in resources if r["type"] == "aws:ec2/placementGroup:PlacementGroup"]
    assert group["inputs"]["strategy"] == "cluster"
    assert _one(resources, LT, "train-nodes")["inputs"]["placement"]["groupName"]


REAPER = "command:local:Command"


def test_destroy_terminates_the_controller_launched_nodes_before_their_network_goes(reference, tmp_path):
    """`pulumi destroy` with nodes running: Pulumi never created the compute instances (the
    controller's ResumeProgram did), so nothing deleted them, they kept billing, and the launch
    template, security group and subnet failed to delete while their interfaces were in use. A
    pulumi-command `local.Command` depends on the launch template (and so on its security group and
    subnet) and the controller depends on it, so destroy runs: controller, then this delete
    command, then the network. Its delete script is run here for real, by bash with the real aws
    CLI against moto's server: it terminates exactly this cluster's and fleet's compute instances
    (never another stack's, another fleet's, or the controller) and waits for them. What only a real
    account proves: the order Pulumi's engine deletes in, and that the ENIs are released by then."""
    import awslocal

    _, resources = reference
    (reaper,) = [r for r in resources if r["type"] == REAPER]
    assert reaper["name"] == "train-node-reaper" and reaper["inputs"]["create"] == "true"
    assert reaper["inputs"]["environment"] == {"FLEETFORM_CLUSTER": "llm-70b_plan", "FLEETFORM_FLEET": "train",
                                               "FLEETFORM_REGION": "us-east-1"}
    assert "train-nodes" in reaper["depends_on"]  # the launch template: deleted after the nodes
    assert "train-node-reaper" in _one(resources, INSTANCE, "train-controller")["depends_on"]  # deleted before
    script = reaper["inputs"]["delete"]
    check = subprocess.run([_program("shellcheck"), "--shell=bash", "-"], input=script, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout
    awslocal.need(awslocal.available())
    with awslocal.moto_server() as url:
        ec2 = awslocal.client("ec2", url)

        def launch(cluster: str, fleet: str, role: str) -> str:
            tags = {"fleetform:cluster": cluster, "fleetform:fleet": fleet, "fleetform:role": role}
            spec = [{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]
            return ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType="m7i.large",
                                     TagSpecifications=spec)["Instances"][0]["InstanceId"]

        nodes = [launch("llm-70b_plan", "train", "compute") for _ in range(3)]
        keep = [launch("llm-70b_prod", "train", "compute"), launch("llm-70b_plan", "other", "compute"),
                launch("llm-70b_plan", "train", "controller")]
        bin_dir = os.path.dirname(awslocal.aws_cli())
        done = subprocess.run(["/bin/bash", "-c", script], capture_output=True, text=True, timeout=120, env={
            **reaper["inputs"]["environment"], **awslocal.CREDENTIALS, "AWS_ENDPOINT_URL": url,
            "PATH": f"{bin_dir}:{os.environ['PATH']}", "HOME": str(tmp_path)})
        assert done.returncode == 0, done.stderr
        states = {i["InstanceId"]: i["State"]["Name"] for r in ec2.describe_instances()["Reservations"]
                  for i in r["Instances"]}
        assert {states[i] for i in nodes} == {"terminated"}, states
        assert {states[i] for i in keep} == {"running"}, states
        again = subprocess.run(["/bin/bash", "-c", script], capture_output=True, text=True, timeout=120, env={
            **reaper["inputs"]["environment"], **awslocal.CREDENTIALS, "AWS_ENDPOINT_URL": url,
            "PATH": f"{bin_dir}:{os.environ['PATH']}", "HOME": str(tmp_path)})
        assert again.returncode == 0 and "terminating" not in again.stderr, again.stderr  # nothing left: no call
