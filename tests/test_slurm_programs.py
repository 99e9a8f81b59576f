"""The rendered resume, suspend and keeper programs of an AWS training fleet, run for real: the
`aws` CLI against moto's server on 127.0.0.1 (tests/awslocal.py) and `scontrol` against a real
slurmctld started from the same rendered folder (tests/slurmctld.py; its own ResumeProgram is
/bin/true there, so only the programs under test touch EC2).

Asserted: exactly the requested nodes start, with the cluster, fleet, role and node tags; a second
call starts nothing; an injected capacity error starts nothing and marks the nodes
POWER_DOWN_FORCE with the reason at once; suspend terminates only this cluster's and fleet's
compute instances of the named nodes: never another stack's or blueprint's node, the controller or
a static node (unless resume-fail says it failed to start). In CI a missing slurmctld, moto or aws
CLI fails these tests.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import awslocal
import slurmctld

pytestmark = pytest.mark.cluster

BLUEPRINT = awslocal.blueprint("{min: 2, max: 6}")
CLUSTER = awslocal.CLUSTER


@pytest.fixture(scope="module", autouse=True)
def need_components():
    awslocal.need(awslocal.available() or (None if slurmctld.available() else "slurmctld is not installed"))


@pytest.fixture(scope="module")
def aws():
    with awslocal.moto_server() as url:
        ec2 = awslocal.client("ec2", url)
        good = ec2.create_launch_template(LaunchTemplateName="a-train", LaunchTemplateData={
            "ImageId": "ami-12c6146b", "InstanceType": "p5.48xlarge"})["LaunchTemplate"]["LaunchTemplateId"]
        full = ec2.create_launch_template(LaunchTemplateName="a-train-nocapacity", LaunchTemplateData={
            "ImageId": "ami-12c6146b", "InstanceType": awslocal.NO_CAPACITY_TYPE})["LaunchTemplate"]["LaunchTemplateId"]
        yield {"url": url, "ec2": ec2, "template": good, "no_capacity": full}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    return awslocal.render_fleet(tmp_path_factory.mktemp("programs"), BLUEPRINT)


@pytest.fixture(scope="module")
def controller(rendered, tmp_path_factory):
    with slurmctld.running(rendered, tmp_path_factory.mktemp("slurmctld")) as conf:
        yield conf


def run_program(rendered: Path, conf: Path, aws: dict, tmp: Path, program: str, *args: str,
                template: str | None = None, cluster: str = CLUSTER, now: float | None = None,
                **extra: str) -> subprocess.CompletedProcess:
    env_file = tmp / f"{cluster}.env"
    env_file.write_text(awslocal.cluster_env("controller", cluster, "train", aws["url"],
                                             FLEETFORM_LAUNCH_TEMPLATE=template or aws["template"], **extra))
    # slurmctld runs these programs with SLURM_CONF as the only variable; the test adds the env file
    # FLEETFORM_ROOT: the programs' logs and the keeper's state under tmp, not this machine's /var
    env = {"SLURM_CONF": str(conf), "FLEETFORM_ENV_FILE": str(env_file), "PATH": os.environ["PATH"],
           "HOME": str(tmp), "FLEETFORM_ROOT": str(tmp / "root")}
    if now is not None:  # the keeper's clock (FLEETFORM_NOW): time moves without sleeping
        env["FLEETFORM_NOW"] = str(now)
    return subprocess.run([str(rendered / "bin" / program), *args], capture_output=True, text=True, env=env,
                          timeout=180)


def instances(ec2, **tags: str) -> dict[str, dict]:
    """Live (pending/running) instances with these tags, by instance id, with their tags as a dict."""
    filters = [{"Name": f"tag:{k.replace('_', ':')}", "Values": [v]} for k, v in tags.items()]
    filters.append({"Name": "instance-state-name", "Values": ["pending", "running"]})
    out = {}
    for r in ec2.describe_instances(Filters=filters)["Reservations"]:
        for i in r["Instances"]:
            out[i["InstanceId"]] = {t["Key"]: t["Value"] for t in i.get("Tags", [])}
    return out


def nodes_of(found: dict[str, dict]) -> list[str]:
    return sorted(t.get("fleetform:node", "") for t in found.values())


def node_state(conf: Path, name: str) -> dict[str, str]:
    out = subprocess.run(["scontrol", "show", "node", "--oneliner", name], capture_output=True, text=True,
                         env={**os.environ, "SLURM_CONF": str(conf)}, timeout=30).stdout
    fields = {}
    for word in out.replace("Reason=", "\nReason=").split("\n")[0].split():
        key, _, value = word.partition("=")
        fields[key] = value
    fields["Reason"] = out.partition("Reason=")[2].strip()
    return fields


def test_resume_launches_exactly_the_nodes_with_their_tags_once(rendered, controller, aws, tmp_path):
    ec2 = aws["ec2"]
    first = run_program(rendered, controller, aws, tmp_path, "resume", "train-[003-004]")
    assert first.returncode == 0, first.stderr
    ours = instances(ec2, fleetform_cluster=CLUSTER, fleetform_fleet="train")
    assert nodes_of(ours) == ["train-003", "train-004"]
    for tags in ours.values():
        assert tags["fleetform:role"] == "compute" and tags["Name"] == tags["fleetform:node"]
    again = run_program(rendered, controller, aws, tmp_path, "resume", "train-[003-004]")
    assert again.returncode == 0, again.stderr
    assert instances(ec2, fleetform_cluster=CLUSTER, fleetform_fleet="train") == ours, "a second call started more"
    more = run_program(rendered, controller, aws, tmp_path, "resume", "train-[003-005]")
    assert more.returncode == 0, more.stderr
    assert nodes_of(instances(ec2, fleetform_cluster=CLUSTER, fleetform_fleet="train")) == [
        "train-003", "train-004", "train-005"]


def test_capacity_error_starts_nothing_and_marks_the_nodes_down_at_once(rendered, controller, aws, tmp_path):
    ec2 = aws["ec2"]
    before = instances(ec2, fleetform_cluster=CLUSTER)
    failed = run_program(rendered, controller, aws, tmp_path, "resume", "train-006", template=aws["no_capacity"])
    assert failed.returncode == 1
    assert instances(ec2, fleetform_cluster=CLUSTER) == before
    state = node_state(controller, "train-006")
    assert "DOWN" in state["State"].split("+"), state
    assert state["Reason"].startswith("fleetform resume failed:") and awslocal.NO_CAPACITY_TYPE in state["Reason"], state


def sinfo_reasons(conf: Path) -> dict[str, str]:
    """`sinfo -R`: node list -> reason, as an admin reads it."""
    out = subprocess.run(["sinfo", "-R", "-h", "-N", "-o", "%N|%E"], capture_output=True, text=True, timeout=30,
                         env={**os.environ, "SLURM_CONF": str(conf)}).stdout
    return dict(line.split("|", 1) for line in out.splitlines() if "|" in line)


def test_insufficient_capacity_downs_the_node_backs_off_then_returns_it_to_service(rendered, aws, tmp_path):
    """The issue's proof, against a real slurmctld: EC2 answers InsufficientInstanceCapacity (injected
    into the real CLI's answer); the node is DOWN with the code in `sinfo -R`; the keeper launches
    nothing of the fleet before INSUFFICIENT_CAPACITY_TIMEOUT_S (600 s, ParallelCluster's
    insufficient_capacity_timeout) has passed on its clock, holds the fleet's other powered-down
    nodes down too, and after it puts the node back in service: IDLE+POWERED_DOWN, resumable, no
    reason; the static nodes are powered up again."""
    cli = flaky_aws(tmp_path, {"run-instances": (99, "InsufficientInstanceCapacity")})
    with slurmctld.running(rendered, tmp_path / "ctld") as conf:
        failed = run_program(rendered, conf, aws, tmp_path, "resume", "train-006", cluster="a-ice", FLEETFORM_AWS_CLI=cli)
        assert failed.returncode == 1, failed.stderr
        down = node_state(conf, "train-006")
        assert "DOWN" in down["State"].split("+") and "POWER_DOWN" not in down["State"], down
        reason = sinfo_reasons(conf).get("train-006", "")
        assert reason.startswith("fleetform resume failed: (Code:InsufficientInstanceCapacity)"), sinfo_reasons(conf)
        start = 1_900_000_000.0
        for clock in (start, start + 300, start + 599):
            kept = run_program(rendered, conf, aws, tmp_path, "keeper", cluster="a-ice", now=clock)
            assert kept.returncode == 0, kept.stderr
            for name in [f"train-00{i}" for i in range(1, 7)]:
                state = node_state(conf, name)["State"].split("+")
                assert "DOWN" in state and not {"POWER_UP", "POWERING_UP"} & set(state), (clock - start, name, state)
            assert sinfo_reasons(conf)["train-006"] == reason, "the first failure's reason was overwritten"
            assert "Code:InsufficientInstanceCapacity" in sinfo_reasons(conf)["train-003"]
        assert instances(aws["ec2"], fleetform_cluster="a-ice") == {}
        state = json.loads((tmp_path / "root/var/lib/fleetform/keeper.json").read_text())
        assert state["capacity"] == {"code": "InsufficientInstanceCapacity", "since": start}
        assert "train-001" not in state["attempts"], "a capacity failure counted towards protected mode"
        back = run_program(rendered, conf, aws, tmp_path, "keeper", cluster="a-ice", now=start + 600)
        assert back.returncode == 0, back.stderr
        for name in [f"train-00{i}" for i in range(3, 7)]:  # NOT_RESPONDING: no slurmd here, as before any launch
            state = set(node_state(conf, name)["State"].split("+"))
            assert {"IDLE", "POWERED_DOWN"} <= state and not state & {"DOWN", "DRAIN"}, (name, state)
        assert not sinfo_reasons(conf), sinfo_reasons(conf)
        for name in ("train-001", "train-002"):
            assert powering_up(conf, name), node_state(conf, name)
        assert "capacity" not in json.loads((tmp_path / "root/var/lib/fleetform/keeper.json").read_text())


def test_a_full_capacity_block_is_retried_each_keeper_round_not_backed_off(rendered, aws, tmp_path):
    """What a pool's release lag that was too short does on the training side: a resume into a Capacity Block whose
    slots a draining inference node still holds. A launch that targets a Capacity Reservation (a Capacity Block is a
    targeted one) without free capacity fails with ReservationCapacityExceeded ("The targeted Capacity Reservation
    does not have enough available instance capacity", EC2 API Reference, Error codes), which is not one of
    ParallelCluster's EC2_ICE_ERROR_CODES nor fleetform_node.INSUFFICIENT_CAPACITY: the node is DOWN with the code,
    no 10-minute back-off starts, and the keeper's next round puts the node back in service (powered down) so that
    slurmctld launches it again for its requeued job, once a minute until the capacity is back (README, Pools)."""
    cli = flaky_aws(tmp_path, {"run-instances": (99, "ReservationCapacityExceeded")})
    with slurmctld.running(rendered, tmp_path / "ctld") as conf:
        failed = run_program(rendered, conf, aws, tmp_path, "resume", "train-006", cluster="a-rce", FLEETFORM_AWS_CLI=cli)
        assert failed.returncode == 1, failed.stderr
        reason = sinfo_reasons(conf).get("train-006", "")
        assert reason.startswith("fleetform resume failed: (Code:ReservationCapacityExceeded)"), sinfo_reasons(conf)
        kept = run_program(rendered, conf, aws, tmp_path, "keeper", cluster="a-rce", now=1_900_000_000.0)
        assert kept.returncode == 0, kept.stderr
        state = set(node_state(conf, "train-006")["State"].split("+"))
        assert {"IDLE", "POWERED_DOWN"} <= state and not state & {"DOWN", "DRAIN"}, state
        assert "capacity" not in json.loads((tmp_path / "root/var/lib/fleetform/keeper.json").read_text())
        assert "Code:" not in sinfo_reasons(conf).get("train-003", ""), "the fleet's other nodes were held"


def test_suspend_terminates_only_this_clusters_compute_nodes(rendered, controller, aws, tmp_path):
    ec2 = aws["ec2"]

    def launch(**tags: str) -> str:
        spec = [{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}]
        return ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType="m7i.large",
                                 TagSpecifications=spec)["Instances"][0]["InstanceId"]

    common = {"fleetform:fleet": "train", "fleetform:node": "train-004"}
    decoys = {
        "other stack": launch(**common, **{"fleetform:cluster": "a_prod", "fleetform:role": "compute"}),
        "other blueprint": launch(**common, **{"fleetform:cluster": "b_dev", "fleetform:role": "compute"}),
        "controller": launch(**common, **{"fleetform:cluster": CLUSTER, "fleetform:role": "controller"}),
    }
    static = launch(**{"fleetform:cluster": CLUSTER, "fleetform:fleet": "train", "fleetform:node": "train-001",
                       "fleetform:role": "compute"})
    mine = {i for i, t in instances(ec2, fleetform_cluster=CLUSTER, fleetform_role="compute").items()
            if t["fleetform:node"] in ("train-003", "train-004")}
    assert len(mine) == 2
    done = run_program(rendered, controller, aws, tmp_path, "suspend", "train-[001,003-004]")
    assert done.returncode == 0, done.stderr
    live = set(instances(ec2))
    assert not mine & live, "this cluster's elastic nodes were not terminated"
    assert set(decoys.values()) <= live, {k: v for k, v in decoys.items() if v not in live}
    assert static in live, "suspend terminated a static node"
    failed = run_program(rendered, controller, aws, tmp_path, "resume-fail", "train-001")
    assert failed.returncode == 0, failed.stderr
    assert static not in set(instances(ec2)), "resume-fail did not terminate the static node that failed"


def powering_up(conf: Path, name: str) -> bool:
    """POWER_UP: asked for; POWERING_UP: ResumeProgram called."""
    state = set(node_state(conf, name)["State"].split("+"))
    return bool(state & {"POWER_UP", "POWERING_UP"}) or "POWERED_DOWN" not in state


def test_keeper_powers_up_static_nodes(rendered, controller, aws, tmp_path):
    assert "POWERED_DOWN" in node_state(controller, "train-002")["State"]
    kept = run_program(rendered, controller, aws, tmp_path, "keeper")
    assert kept.returncode == 0, kept.stderr
    for name in ("train-001", "train-002"):
        assert powering_up(controller, name), node_state(controller, name)
    assert "POWERED_DOWN" in node_state(controller, "train-003")["State"], "the keeper started an elastic node"


def test_keeper_stops_powering_up_a_static_node_after_repeated_failures(rendered, aws, tmp_path):
    """ParallelCluster's protected mode (protected_failure_count): a static node whose last 10
    power-ups never brought it up (state file as the keeper left it after 10 failed rounds) is
    drained with the reason instead of launched again; the other static node is powered up and
    counted; an admin's resume makes the keeper try again. A slurmctld of its own: every static
    node starts POWERED_DOWN."""
    with slurmctld.running(rendered, tmp_path / "ctld") as conf:
        state = tmp_path / "root/var/lib/fleetform/keeper.json"
        state.parent.mkdir(parents=True)
        state.write_text(json.dumps({"attempts": {"train-002": 10}, "protected": []}))
        kept = run_program(rendered, conf, aws, tmp_path, "keeper")
        assert kept.returncode == 0, kept.stderr
        drained = node_state(conf, "train-002")
        assert "DRAIN" in drained["State"] and "POWERED_DOWN" in drained["State"], drained
        assert drained["Reason"].startswith("fleetform keeper: 10 power-ups in a row failed"), drained
        assert powering_up(conf, "train-001")
        assert json.loads(state.read_text()) == {"attempts": {"train-001": 1, "train-002": 10}, "protected": ["train-002"]}
        again = run_program(rendered, conf, aws, tmp_path, "keeper")
        assert again.returncode == 0, again.stderr
        assert "DRAIN" in node_state(conf, "train-002")["State"], "the keeper launched a node it gave up on"
        subprocess.run(["scontrol", "update", "nodename=train-002", "state=resume"], check=True, timeout=30,
                       env={**os.environ, "SLURM_CONF": str(conf)})
        resumed = run_program(rendered, conf, aws, tmp_path, "keeper")
        assert resumed.returncode == 0, resumed.stderr
        assert powering_up(conf, "train-002")
        assert json.loads(state.read_text())["attempts"]["train-002"] == 1


def test_fleet_json_names_what_the_programs_need(rendered):
    fleet = json.loads((rendered / "bin" / "fleet.json").read_text())
    assert fleet["static_nodes"] == "train-[001-002]" and fleet["elastic_nodes"] == "train-[003-006]"
    assert fleet["slurm_version"] == "22.05"


def test_topology_conf_from_describe_instance_topology(rendered, controller, monkeypatch, tmp_path):
    """moto has no DescribeInstanceTopology: the tree is built from the example of the EC2 User Guide
    ("How Amazon EC2 topology works": NetworkNodes top layer first; instances 1 and 2 under NN4,
    3 under NN5, both under NN2; 4 under NN6 under NN3; NN1 on top) and slurmctld must accept it."""
    import importlib.machinery
    import importlib.util

    monkeypatch.setenv("SLURM_CONF", str(controller))
    monkeypatch.syspath_prepend(str(rendered / "bin"))
    loader = importlib.machinery.SourceFileLoader("fleetform_topology", str(rendered / "bin" / "topology"))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(module)
    placed = {"train-001": ["nn-1", "nn-2", "nn-4"], "train-002": ["nn-1", "nn-2", "nn-4"],
              "train-003": ["nn-1", "nn-2", "nn-5"], "train-004": ["nn-1", "nn-3", "nn-6"]}
    text = module.tree(placed, [f"train-00{i}" for i in range(1, 7)])
    assert text.splitlines()[1:] == [
        "SwitchName=nn-4 Nodes=train-[001-002]", "SwitchName=nn-5 Nodes=train-003", "SwitchName=nn-6 Nodes=train-004",
        "SwitchName=nn-1 Switches=nn-2,nn-3", "SwitchName=nn-2 Switches=nn-4,nn-5", "SwitchName=nn-3 Switches=nn-6",
        "SwitchName=ec2-unknown Nodes=train-[005-006]", "SwitchName=ec2 Switches=ec2-unknown,nn-1"]
    folder = tmp_path / "slurm"
    shutil.copytree(rendered, folder)
    (folder / "topology.conf").write_text(text)
    outcome = slurmctld.check(folder)
    assert outcome.ok, slurmctld.problems(outcome)


def test_bootstrap_refuses_an_image_with_another_slurm(aws, tmp_path):
    """The blueprint says 23.11, this machine's slurmd is Debian's 22.05: the node stops at once and
    says which is which (negative control: the cluster test boots the same program on 22.05)."""
    slurm = awslocal.render_fleet(tmp_path, awslocal.blueprint("2").replace('"22.05"', '"23.11"'))
    env_file = tmp_path / "cluster.env"
    env_file.write_text(awslocal.cluster_env("compute", CLUSTER, "train", aws["url"]))
    result = subprocess.run([str(slurm / "bin" / "bootstrap")], capture_output=True, text=True, timeout=60, env={
        "FLEETFORM_ROOT": str(tmp_path / "root"), "FLEETFORM_ENV_FILE": str(env_file), "PATH": os.environ["PATH"]})
    assert result.returncode == 1
    assert "the image has Slurm 22.05" in result.stderr and "renders for Slurm 23.11" in result.stderr, result.stderr


def flaky_aws(tmp: Path, failures: dict[str, tuple[int, str]]) -> str:
    """An `aws` for FLEETFORM_AWS_CLI: the real CLI, except that the first N calls of an EC2 operation
    fail the way the CLI reports an API error (exit 254, `An error occurred (CODE)` on stderr)."""
    wrapper, counts = tmp / "aws-flaky", tmp / "aws-counts.json"
    wrapper.write_text(f"""#!{sys.executable}
import json, os, sys
failures, counts = {failures!r}, {str(counts)!r}
seen = json.load(open(counts)) if os.path.exists(counts) else {{}}
op = sys.argv[sys.argv.index("ec2") + 1] if "ec2" in sys.argv else ""
seen[op] = seen.get(op, 0) + 1
json.dump(seen, open(counts, "w"))
if op in failures and seen[op] <= failures[op][0]:
    code = failures[op][1]
    sys.stderr.write(f"An error occurred ({{code}}) when calling the {{op}} operation: injected by the test\\n")
    sys.exit(254)
os.execv({awslocal.aws_cli()!r}, [{awslocal.aws_cli()!r}, *sys.argv[1:]])
""")
    wrapper.chmod(0o755)
    return str(wrapper)


def test_resume_retries_create_tags_while_ec2_does_not_know_the_new_instance(rendered, controller, aws, tmp_path):
    """EC2's eventual consistency: CreateTags right after RunInstances may answer
    InvalidInstanceID.NotFound. Resume retries instead of terminating the launch."""
    cli = flaky_aws(tmp_path, {"create-tags": (2, "InvalidInstanceID.NotFound")})
    done = run_program(rendered, controller, aws, tmp_path, "resume", "train-005", cluster="a-tags",
                       FLEETFORM_AWS_CLI=cli)
    assert done.returncode == 0, done.stderr
    assert "InvalidInstanceID.NotFound just after launch" in done.stderr
    assert nodes_of(instances(aws["ec2"], fleetform_cluster="a-tags")) == ["train-005"]


def test_resume_undo_retries_terminate_while_ec2_does_not_know_the_new_instance(rendered, controller, aws, tmp_path):
    """A launch that fails at tagging (here: not allowed) is terminated even when TerminateInstances
    first answers InvalidInstanceID.NotFound; nothing of it stays running."""
    cli = flaky_aws(tmp_path, {"create-tags": (99, "UnauthorizedOperation"),
                               "terminate-instances": (1, "InvalidInstanceID.NotFound")})
    done = run_program(rendered, controller, aws, tmp_path, "resume", "train-006", cluster="a-undo",
                       FLEETFORM_AWS_CLI=cli)
    assert done.returncode == 1
    assert "terminated what this call started" in done.stderr, done.stderr
    assert instances(aws["ec2"], fleetform_cluster="a-undo") == {}


def test_resume_names_nodes_in_the_zone_suspend_and_keeper_remove_them(rendered, controller, aws, tmp_path):
    """ParallelCluster's naming (fleetform_dns.py): resume UPSERTs `<node>.<zone>` A <private ip>
    for the instances it starts, in one change batch; suspend deletes the records of the nodes it
    terminates; the keeper deletes records of this fleet's nodes that have no instance, and leaves
    every other record of the zone alone. A cluster of its own, so no other test's instance counts."""
    ec2, route53 = aws["ec2"], awslocal.client("route53", aws["url"])
    cluster, zone = "dns-dev", "train.dns-dev.fleetform.internal"
    vpc = ec2.create_vpc(CidrBlock="10.9.0.0/16")["Vpc"]["VpcId"]
    zone_id = route53.create_hosted_zone(Name=zone, CallerReference="dns-dev", HostedZoneConfig={"PrivateZone": True},
                                         VPC={"VPCRegion": awslocal.REGION, "VPCId": vpc})["HostedZone"]["Id"]
    dns = {"FLEETFORM_DNS_ZONE": zone, "FLEETFORM_DNS_ZONE_ID": zone_id.rsplit("/", 1)[-1]}

    def a_records() -> dict[str, str]:
        return {r["Name"].rstrip("."): r["ResourceRecords"][0]["Value"]
                for r in route53.list_resource_record_sets(HostedZoneId=zone_id)["ResourceRecordSets"]
                if r["Type"] == "A"}

    started = run_program(rendered, controller, aws, tmp_path, "resume", "train-[003-004]", cluster=cluster, **dns)
    assert started.returncode == 0, started.stderr
    ours = instances(ec2, fleetform_cluster=cluster)
    addresses = {tags["fleetform:node"]: ec2.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0][
        "PrivateIpAddress"] for iid, tags in ours.items()}
    assert a_records() == {f"{n}.{zone}": a for n, a in addresses.items()} and len(addresses) == 2

    stopped = run_program(rendered, controller, aws, tmp_path, "suspend", "train-003", cluster=cluster, **dns)
    assert stopped.returncode == 0, stopped.stderr
    assert a_records() == {f"train-004.{zone}": addresses["train-004"]}

    # a record whose instance is gone (train-005), and records that are not this fleet's nodes
    route53.change_resource_record_sets(HostedZoneId=zone_id, ChangeBatch={"Changes": [
        {"Action": "UPSERT", "ResourceRecordSet": {"Name": f"{name}.{zone}", "Type": "A", "TTL": 120,
                                                   "ResourceRecords": [{"Value": "10.9.0.99"}]}}
        for name in ("train-005", "train-controller", "login")]})
    kept = run_program(rendered, controller, aws, tmp_path, "keeper", cluster=cluster, **dns)
    assert kept.returncode == 0, kept.stderr
    assert set(a_records()) == {f"train-004.{zone}", f"train-controller.{zone}", f"login.{zone}"}


def test_keeper_goes_on_when_the_zone_cannot_be_changed(rendered, controller, aws, tmp_path):
    """Reaping DNS records is best effort each minute: a DELETE that races suspend's (or resume's
    UPSERT of the same name) fails the whole change batch, and Route 53 throttles. Such a failure
    is logged and the keeper still runs topology, as suspend leaves a failed delete to the keeper.
    Here the zone id names no zone, so listing its records fails."""
    kept = run_program(rendered, controller, aws, tmp_path, "keeper", cluster="dns-gone",
                       FLEETFORM_DNS_ZONE="train.dns-gone.fleetform.internal", FLEETFORM_DNS_ZONE_ID="Z0NOSUCHZONE")
    assert kept.returncode == 0, kept.stderr
    assert "DNS records not reaped (next round retries)" in kept.stderr, kept.stderr


def _publish(s3, bucket: str, folder: Path, change: dict[str, bytes] | None = None) -> str:
    """The rendered folder as the one artifact object (what `pulumi up` uploads); `change` replaces
    files after manifest.json was written (a tampered artifact)."""
    from fleetform.render.archive import archive

    listed = [*json.loads((folder / "manifest.json").read_text())["files"], "manifest.json"]
    files = {name: (folder / name).read_bytes() for name in listed}  # not the programs' __pycache__
    files.update(change or {})
    return s3.put_object(Bucket=bucket, Key="fleetform/rendered.tar.gz", Body=archive(files))["VersionId"]


def test_update_installs_a_checked_version_and_refuses_a_tampered_one(rendered, aws, tmp_path):
    """bin/update on a compute node (no slurmd here: nothing to signal): a tampered artifact is
    refused and nothing is switched; the good one lands in its own release folder, the deployed
    path becomes a symlink to it, slurm.conf names the programs through that path, and the version
    is recorded, so the next round does nothing."""
    s3 = awslocal.client("s3", aws["url"])
    s3.create_bucket(Bucket="update-test")
    s3.put_bucket_versioning(Bucket="update-test", VersioningConfiguration={"Status": "Enabled"})
    folder = rendered.parents[1]
    root = tmp_path / "root"
    env_file = tmp_path / "compute.env"
    env_file.write_text(awslocal.cluster_env("compute", CLUSTER, "train", aws["url"], FLEETFORM_CONFIG_BUCKET="update-test",
                                             FLEETFORM_CONFIG_KEY="fleetform/rendered.tar.gz",
                                             FLEETFORM_AWS_CLI=awslocal.aws_cli()))
    env = {"FLEETFORM_ENV_FILE": str(env_file), "PATH": os.environ["PATH"], "HOME": str(tmp_path),
           "FLEETFORM_ROOT": str(root)}
    update = [sys.executable, str(rendered / "bin" / "update")]
    deployed = root / "opt/fleetform/rendered"

    _publish(s3, "update-test", folder, {"train/nccl.env": b"NCCL_DEBUG=TRACE\n"})
    refused = subprocess.run(update, capture_output=True, text=True, env=env, timeout=120)
    assert refused.returncode == 1 and "do not match its manifest.json: train/nccl.env" in refused.stderr, refused.stderr
    assert not deployed.exists() and not (root / "var/lib/fleetform/artifact.json").exists()

    version = _publish(s3, "update-test", folder)
    done = subprocess.run(update, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert deployed.is_symlink() and (deployed / "train/slurm/bin/fleet.json").exists()
    assert deployed.resolve().parent == root / "opt/fleetform/rendered.releases"
    assert json.loads((root / "var/lib/fleetform/artifact.json").read_text()) == {"version": version}
    conf = (root / "etc/slurm/slurm.conf").read_text()
    assert f"TaskProlog={deployed}/train/slurm/bin/task-prolog" in conf, conf
    assert "rendered.releases" not in conf  # a later switch keeps every path slurm.conf names
    again = subprocess.run(update, capture_output=True, text=True, env=env, timeout=120)
    assert again.returncode == 0 and "installed" not in again.stderr, again.stderr


def test_update_rolls_only_idle_nodes_of_another_generation(rendered, controller, aws, tmp_path):
    """A node whose instance was launched from another generation (fleet.json `generation`: instance
    type, image, EFA layout, placement) is drained and, being idle, its instance terminated; a node
    of the current generation is left alone. (No artifact here: the roll runs even when the
    artifact cannot be applied, and update says so with exit 1.)"""
    ec2 = aws["ec2"]
    generation = json.loads((rendered / "bin" / "fleet.json").read_text())["generation"]

    def launch(node: str, gen: str) -> str:
        tags = [{"Key": "fleetform:cluster", "Value": CLUSTER}, {"Key": "fleetform:fleet", "Value": "train"},
                {"Key": "fleetform:role", "Value": "compute"}, {"Key": "fleetform:node", "Value": node},
                {"Key": "fleetform:generation", "Value": gen}]
        return ec2.run_instances(MinCount=1, MaxCount=1, LaunchTemplate={"LaunchTemplateId": aws["template"]},
                                 TagSpecifications=[{"ResourceType": "instance", "Tags": tags}])["Instances"][0]["InstanceId"]

    old, current = launch("train-005", "0000000000000000"), launch("train-006", generation)
    rolled = run_program(rendered, controller, aws, tmp_path, "update")
    assert "FLEETFORM_CONFIG_BUCKET" in rolled.stderr, rolled.stderr
    assert "rolled train-005" in rolled.stderr, rolled.stderr
    state = {i["InstanceId"]: i["State"]["Name"] for r in ec2.describe_instances(InstanceIds=[old, current])[
        "Reservations"] for i in r["Instances"]}
    assert state[old] in ("shutting-down", "terminated") and state[current] == "running", state
    assert "node roll" in node_state(controller, "train-005")["Reason"] or \
        "DRAIN" not in node_state(controller, "train-005")["State"], node_state(controller, "train-005")
    assert "DRAIN" not in node_state(controller, "train-006")["State"]
    ec2.terminate_instances(InstanceIds=[current])


FAST_POWER_SAVE = "SuspendTimeout=2\nSlurmctldParameters=idle_on_node_suspend,power_save_interval=1,power_save_min_interval=0\n"
"""slurmctld's power-save thread runs every second and a power-down completes in 2 s (the rendered
values: every 10 s and 300 s), so a node's way back to IDLE+POWERED_DOWN is seen, not assumed."""


def wait_for_state(conf: Path, name: str, flags: set[str], timeout: float = 30.0) -> set[str]:
    import time
    deadline = time.monotonic() + timeout
    while True:
        state = set(node_state(conf, name)["State"].split("+"))
        if flags <= state and "DOWN" not in state or time.monotonic() > deadline:
            return state
        time.sleep(0.5)


def test_keeper_recovers_a_dead_elastic_node(rendered, aws, tmp_path):
    """An elastic node whose instance died (slurmctld set it DOWN) is not left DOWN forever: the keeper
    terminates its instance and powers it down, and slurmctld ends it IDLE+POWERED_DOWN, ready for the
    next job (ParallelCluster clustermgtd.py _handle_unhealthy_dynamic_nodes). A DRAINed node is an
    admin's and is left alone (negative control)."""
    with slurmctld.running(rendered, tmp_path / "ctld", extra=FAST_POWER_SAVE) as conf:
        env = {**os.environ, "SLURM_CONF": str(conf)}
        started = run_program(rendered, conf, aws, tmp_path, "resume", "train-[004-005]", cluster="a-dead")
        assert started.returncode == 0, started.stderr
        for name in ("train-004", "train-005"):
            subprocess.run(["scontrol", "update", f"nodename={name}", "state=power_up"], check=True, env=env, timeout=30)
        assert wait_for_state(conf, "train-005", {"POWERING_UP"}) >= {"POWERING_UP"}
        subprocess.run(["scontrol", "update", "nodename=train-005", "state=down", "reason=Not responding"],
                       check=True, env=env, timeout=30)
        subprocess.run(["scontrol", "update", "nodename=train-004", "state=drain", "reason=admin: disk check"],
                       check=True, env=env, timeout=30)
        kept = run_program(rendered, conf, aws, tmp_path, "keeper", cluster="a-dead")
        assert kept.returncode == 0, kept.stderr
        assert nodes_of(instances(aws["ec2"], fleetform_cluster="a-dead")) == ["train-004"], "dead instance kept"
        state = wait_for_state(conf, "train-005", {"IDLE", "POWERED_DOWN"})
        assert {"IDLE", "POWERED_DOWN"} <= state and not state & {"DOWN", "DRAIN"}, state
        assert node_state(conf, "train-004")["Reason"].startswith("admin: disk check")


def test_keeper_terminates_named_instances_whose_node_is_powered_down(rendered, aws, tmp_path):
    """A suspend that failed leaves a named elastic instance running while its node is powered down;
    an admin's `state=power_down` of a static node leaves its instance running too (suspend never
    terminates static nodes). The keeper terminates both once they are older than ORPHAN_GRACE_S
    (ParallelCluster's orphaned_instance_timeout, 300 s) and powers the static node up, so resume
    launches it anew; an instance whose node is powering up, and one younger than the grace, stay."""
    import time
    with slurmctld.running(rendered, tmp_path / "ctld") as conf:
        env = {**os.environ, "SLURM_CONF": str(conf)}
        started = run_program(rendered, conf, aws, tmp_path, "resume", "train-[001,003-004]", cluster="a-orphan")
        assert started.returncode == 0, started.stderr
        ids = {t["fleetform:node"]: i for i, t in instances(aws["ec2"], fleetform_cluster="a-orphan").items()}
        subprocess.run(["scontrol", "update", "nodename=train-004", "state=power_up"], check=True, env=env, timeout=30)
        # train-001 (static) and train-003 (elastic): IDLE+POWERED_DOWN in Slurm, their instances running
        old = run_program(rendered, conf, aws, tmp_path, "keeper", cluster="a-orphan", now=time.time() + 301)
        assert old.returncode == 0, old.stderr
        live = set(instances(aws["ec2"], fleetform_cluster="a-orphan"))
        assert ids["train-001"] not in live and ids["train-003"] not in live, old.stderr
        assert ids["train-004"] in live, "the instance of a node powering up was terminated"
        assert powering_up(conf, "train-001"), node_state(conf, "train-001")
        # slurmctld now runs the ResumeProgram for train-001 (here /bin/true: the test runs it)
        again = run_program(rendered, conf, aws, tmp_path, "resume", "train-001", cluster="a-orphan")
        assert again.returncode == 0, again.stderr
        new = {t["fleetform:node"]: i for i, t in instances(aws["ec2"], fleetform_cluster="a-orphan").items()}
        assert new.get("train-001") not in (None, ids["train-001"]), new
        # within the grace a powered-down node's instance stays (a resume may be under way)
        late = run_program(rendered, conf, aws, tmp_path, "resume", "train-006", cluster="a-orphan")
        assert late.returncode == 0, late.stderr
        young = run_program(rendered, conf, aws, tmp_path, "keeper", cluster="a-orphan", now=time.time() + 60)
        assert young.returncode == 0, young.stderr
        assert "train-006" in nodes_of(instances(aws["ec2"], fleetform_cluster="a-orphan")), young.stderr


def test_instances_asks_for_node_names_in_chunks_under_the_filter_value_limit(rendered, aws, tmp_path):
    """EC2 takes at most 200 filter values in one call (FilterLimitExceeded, see FILTER_VALUES_MAX):
    401 node names plus the 5 values of the cluster and state filters are asked in 3
    DescribeInstances calls, and an instance named in the last chunk is found."""
    cli = flaky_aws(tmp_path, {})
    env_file = tmp_path / "a-batch.env"
    env_file.write_text(awslocal.cluster_env("controller", "a-batch", "train", aws["url"], FLEETFORM_AWS_CLI=cli))
    spec = [{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in {
        "fleetform:cluster": "a-batch", "fleetform:fleet": "train", "fleetform:role": "compute",
        "fleetform:node": "train-401"}.items()]}]
    aws["ec2"].run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType="m7i.large",
                             TagSpecifications=spec)
    script = (f"import sys; sys.path.insert(0, {str(rendered / 'bin')!r}); import fleetform_node as f; "
              "found = f.instances(f.environment(), ('pending', 'running'), [f'train-{i:03d}' for i in range(1, 402)]); "
              "print(' '.join(f.tag(i, 'fleetform:node') for i in found))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env={
        "FLEETFORM_ENV_FILE": str(env_file), "PATH": os.environ["PATH"], "FLEETFORM_ROOT": str(tmp_path / "root")})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["train-401"]
    assert json.loads((tmp_path / "aws-counts.json").read_text()) == {"describe-instances": 3}


def capacity_block_aws(tmp: Path, state: str) -> str:
    """An `aws` for FLEETFORM_AWS_CLI: the real CLI against moto, except DescribeCapacityReservations
    (moto does not implement it), answered the way EC2 documents it (CapacityReservations[].State,
    StartDate) for the one reservation asked for."""
    wrapper = tmp / f"aws-block-{state}"
    wrapper.write_text(f"""#!{sys.executable}
import json, os, sys
if "describe-capacity-reservations" in sys.argv:
    block = sys.argv[sys.argv.index("--capacity-reservation-ids") + 1]
    print(json.dumps({{"CapacityReservations": [{{"CapacityReservationId": block, "State": {state!r},
                                                   "StartDate": "2030-01-06T11:30:00+00:00"}}]}}))
    sys.exit(0)
os.execv({awslocal.aws_cli()!r}, [{awslocal.aws_cli()!r}, *sys.argv[1:]])
""")
    wrapper.chmod(0o755)
    return str(wrapper)


def test_keeper_waits_for_the_capacity_block_to_be_active(rendered, aws, tmp_path):
    """Before a Capacity Block's start every launch fails; the keeper used to power the static nodes
    up every minute and drain them all after 10 failures. With FLEETFORM_CAPACITY_BLOCK it asks EC2
    for the reservation's state and powers nothing up, counts nothing and drains nothing until it is
    active; then it powers the static nodes up (a count of 9 already reached stays 9, not 10)."""
    with slurmctld.running(rendered, tmp_path / "ctld") as conf:
        state = tmp_path / "root/var/lib/fleetform/keeper.json"
        state.parent.mkdir(parents=True)
        state.write_text(json.dumps({"attempts": {"train-001": 9}, "protected": []}))
        for _ in range(2):
            kept = run_program(rendered, conf, aws, tmp_path, "keeper", cluster="a-block",
                               FLEETFORM_CAPACITY_BLOCK="cr-0a1b2c3d4e5f67890",
                               FLEETFORM_AWS_CLI=capacity_block_aws(tmp_path, "payment-pending"))
            assert kept.returncode == 0, kept.stderr
            assert "Capacity Block cr-0a1b2c3d4e5f67890 is payment-pending (starts 2030-01-06" in kept.stderr
            for name in ("train-001", "train-002"):
                flags = set(node_state(conf, name)["State"].split("+"))
                assert "POWERED_DOWN" in flags and not flags & {"POWER_UP", "POWERING_UP", "DRAIN"}, (name, flags)
        assert json.loads(state.read_text())["attempts"] == {"train-001": 9}
        active = run_program(rendered, conf, aws, tmp_path, "keeper", cluster="a-block",
                             FLEETFORM_CAPACITY_BLOCK="cr-0a1b2c3d4e5f67890",
                             FLEETFORM_AWS_CLI=capacity_block_aws(tmp_path, "active"))
        assert active.returncode == 0, active.stderr
        for name in ("train-001", "train-002"):
            assert powering_up(conf, name), node_state(conf, name)


@pytest.mark.parametrize("role", ["compute", "login"])
def test_update_makes_the_users_of_a_new_artifact_version(aws, tmp_path, role):
    """Day 2 of issue 20: a new artifact whose bin/users.json lists users reaches a running machine
    through bin/update, which runs the bootstrap's accounts step after installing the Slurm files.
    With FLEETFORM_ROOT (unprivileged, as here) accounts says which users it would create; on a
    machine it creates them (tests/test_bootstrap_machine.py, tests/test_multihost.py). Control: an
    artifact without users.json makes none. A login node runs the same timer (a user added must be
    able to log in there), and reloads no daemon: it has none."""
    from test_bootstrap_machine import USERS_BLUEPRINT

    s3 = awslocal.client("s3", aws["url"])
    for case, text in (("users", USERS_BLUEPRINT), ("plain", BLUEPRINT)):
        bucket = f"update-users-{case}-{role}"
        s3.create_bucket(Bucket=bucket)
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        work = tmp_path / case
        work.mkdir()
        slurm = awslocal.render_fleet(work, text)
        env_file = work / f"{role}.env"
        env_file.write_text(awslocal.cluster_env(role, CLUSTER, "train", aws["url"], FLEETFORM_CONFIG_BUCKET=bucket,
                                                 FLEETFORM_CONFIG_KEY="fleetform/rendered.tar.gz",
                                                 FLEETFORM_AWS_CLI=awslocal.aws_cli()))
        env = {"FLEETFORM_ENV_FILE": str(env_file), "PATH": os.environ["PATH"], "HOME": str(work),
               "FLEETFORM_ROOT": str(work / "root")}
        _publish(s3, bucket, slurm.parents[1])
        done = subprocess.run([sys.executable, str(slurm / "bin" / "update")], capture_output=True, text=True,
                              env=env, timeout=120)
        assert done.returncode == 0, done.stderr
        # `update --install` (the new release's own code) logs into its log file, not the caller's stderr
        logs = "".join(p.read_text() for p in (work / "root/var/log/fleetform").rglob("update.log"))
        assert "installed the Slurm files" in logs, logs
        assert ("users alice, bob not created" in logs) == (case == "users"), logs
        assert ("login node: no daemon to reload" in done.stderr + logs) == (role == "login"), done.stderr + logs


ACCOUNTING_BLUEPRINT = awslocal.blueprint("2").replace(
    "partitions: [{name: gpu, default: true}]}",
    "partitions: [{name: gpu, default: true}], accounting: {}, teams: [{name: llm, users: [alice]}]}")


def load_bootstrap(slurm: Path, monkeypatch, root: Path, env_file: Path):
    """The rendered bootstrap as a module (its functions run one by one, as in the topology test)."""
    import importlib.machinery
    import importlib.util

    monkeypatch.setenv("FLEETFORM_ROOT", str(root))
    monkeypatch.setenv("FLEETFORM_ENV_FILE", str(env_file))
    monkeypatch.syspath_prepend(str(slurm / "bin"))
    for name in ("fleetform_node",):  # read FLEETFORM_ROOT at import: imported anew for this root
        sys.modules.pop(name, None)
    loader = importlib.machinery.SourceFileLoader("fleetform_bootstrap", str(slurm / "bin" / "bootstrap"))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(module)
    return module


def test_bootstrap_writes_the_databases_address_user_and_password_from_its_rds_secret(aws, tmp_path, monkeypatch):
    """On AWS slurmdbd.conf names no database: the controller's bootstrap reads the RDS-managed secret
    (JSON with username and password) and writes StorageHost/Port/User/Pass into the file slurmdbd.conf
    includes, mode 600; `#` and `\\` are escaped as Slurm's parser reads them back (the accounting
    cluster test logs slurmdbd in with such a password)."""
    slurm = awslocal.render_fleet(tmp_path, ACCOUNTING_BLUEPRINT)
    assert (slurm / "slurmdbd.conf").exists() and (slurm / "accounts.cfg").exists()
    keys = [line.partition("=")[0] for line in (slurm / "slurmdbd.conf").read_text().splitlines() if "=" in line
            and not line.startswith("#")]
    assert not {"StorageHost", "StoragePort", "StorageUser", "StoragePass"} & set(keys), keys
    secrets = awslocal.client("secretsmanager", aws["url"])
    arn = secrets.create_secret(Name="rds!db-1234", SecretString=json.dumps(
        {"username": "slurm", "password": "a#b\\c$d"}))["ARN"]
    env_file = tmp_path / "cluster.env"
    env_file.write_text(awslocal.cluster_env("controller", CLUSTER, "train", aws["url"], FLEETFORM_DB_SECRET=arn,
                                             FLEETFORM_DB_HOST="db.abc.us-east-1.rds.amazonaws.com",
                                             FLEETFORM_DB_PORT="3306"))
    root = tmp_path / "root"
    bootstrap = load_bootstrap(slurm, monkeypatch, root, env_file)
    assert bootstrap.accounting()
    conf = root / "etc" / "slurm" / "slurm.conf"
    conf.parent.mkdir(parents=True)
    conf.write_text((slurm / "slurm.conf").read_text())
    dbd = bootstrap.accounting_files(bootstrap.environment(), conf)
    storage = root / "etc" / "slurm" / "slurmdbd-storage.conf"
    assert storage.read_text() == ("StorageHost=db.abc.us-east-1.rds.amazonaws.com\nStoragePort=3306\n"
                                   "StorageUser=slurm\nStoragePass=a\\#b\\\\c$d\n")
    assert storage.stat().st_mode & 0o777 == 0o600 and dbd.stat().st_mode & 0o777 == 0o600
    assert f"Include {storage}" in dbd.read_text().splitlines()
    with pytest.raises(bootstrap.Failure, match="not RDS's JSON"):
        bootstrap.storage_lines("not json", "h", "3306")


def test_a_rotated_database_password_reaches_slurmdbd(aws, tmp_path, monkeypatch):
    """RDS rotates its managed master password (every 7 days by default: RDS User Guide, "Password
    management with Amazon RDS and AWS Secrets Manager"), and slurmdbd logs in with the StoragePass it
    read at start for every MySQL connection it opens later (Slurm accounting_storage_mysql.c,
    acct_storage_p_get_connection: one per client connection). The keeper's round follows the
    secret: a changed password is written to the storage file and slurmdbd restarted; an unchanged
    one changes nothing."""
    slurm = awslocal.render_fleet(tmp_path, ACCOUNTING_BLUEPRINT)
    secrets = awslocal.client("secretsmanager", aws["url"])
    arn = secrets.create_secret(Name="rds!db-rotated", SecretString=json.dumps(
        {"username": "slurm", "password": "before"}))["ARN"]
    env_file = tmp_path / "cluster.env"
    env_file.write_text(awslocal.cluster_env("controller", CLUSTER, "train", aws["url"], FLEETFORM_DB_SECRET=arn,
                                             FLEETFORM_DB_HOST="db.example", FLEETFORM_DB_PORT="3306"))
    root = tmp_path / "root"
    bootstrap = load_bootstrap(slurm, monkeypatch, root, env_file)
    conf = root / "etc" / "slurm" / "slurm.conf"
    conf.parent.mkdir(parents=True)
    conf.write_text((slurm / "slurm.conf").read_text())
    env = bootstrap.environment()
    assert not bootstrap.refresh_storage(env, conf)  # before the bootstrap set it up: nothing to follow
    bootstrap.accounting_files(env, conf)
    storage = root / "etc" / "slurm" / "slurmdbd-storage.conf"
    assert "StoragePass=before" in storage.read_text().splitlines()
    assert not bootstrap.refresh_storage(env, conf)
    secrets.put_secret_value(SecretId=arn, SecretString=json.dumps({"username": "slurm", "password": "after"}))
    assert bootstrap.refresh_storage(env, conf)
    assert "StoragePass=after" in storage.read_text().splitlines()
    assert storage.stat().st_mode & 0o777 == 0o600
    keeper = (slurm / "bin" / "keeper").read_text()
    assert "database_password(env)" in keeper.split("def main", 1)[1]  # each keeper round runs it


def test_update_loads_a_changed_accounts_cfg_once(aws, tmp_path):
    """Day 2 on the controller (bin/update --install of a new release): slurmdbd's files are written
    again and accounts.cfg is loaded with `sacctmgr load` when it differs from the one last loaded,
    and not again when it does not. sacctmgr here is a stand-in that records its calls and answers
    `show tres` with gres/gpu (the real one is run by tests/test_accounting_cluster.py)."""
    slurm = awslocal.render_fleet(tmp_path, ACCOUNTING_BLUEPRINT)
    arn = awslocal.client("secretsmanager", aws["url"]).create_secret(
        Name="rds!db-update", SecretString=json.dumps({"username": "slurm", "password": "pw"}))["ARN"]
    env_file = tmp_path / "cluster.env"
    env_file.write_text(awslocal.cluster_env("controller", CLUSTER, "train", aws["url"], FLEETFORM_DB_SECRET=arn,
                                             FLEETFORM_DB_HOST="db.example", FLEETFORM_DB_PORT="3306"))
    fake = tmp_path / "fake"
    fake.mkdir()
    calls = tmp_path / "sacctmgr.calls"
    (fake / "sacctmgr").write_text(f"""#!/bin/sh
echo "$*" >> {calls}
case "$*" in *"show tres"*) echo 'gres|gpu' ;; esac
""")
    (fake / "sacctmgr").chmod(0o755)
    env = {"FLEETFORM_ROOT": str(tmp_path / "root"), "FLEETFORM_ENV_FILE": str(env_file),
           "PATH": f"{fake}:{os.environ['PATH']}", "HOME": str(tmp_path)}

    def install() -> list[str]:
        result = subprocess.run([sys.executable, str(slurm / "bin" / "update"), "--install"], capture_output=True,
                                text=True, timeout=120, env=env)
        assert result.returncode == 0, result.stderr
        return [line for line in calls.read_text().splitlines() if line.startswith("-i load")] if calls.exists() else []

    assert install() == [f"-i load file={slurm / 'accounts.cfg'}"]
    assert install() == [f"-i load file={slurm / 'accounts.cfg'}"]  # unchanged: not loaded again
    (slurm / "accounts.cfg").write_text((slurm / "accounts.cfg").read_text() + "\n")
    assert install() == [f"-i load file={slurm / 'accounts.cfg'}"] * 2
    storage = tmp_path / "root" / "etc" / "slurm" / "slurmdbd-storage.conf"
    assert storage.read_text().splitlines()[0] == "StorageHost=db.example"
