"""A Slurm cluster of three hosts, each in its own network, UTS, mount and PID namespace that this
test makes (tests/multihost.py): a controller and two compute nodes, each booted from a clean
Debian 12 root made by `debootstrap` with no Slurm and no munge, so each machine has only what its
own bootstrap installed (from a local apt repository: the hosts have no Internet). They are
started from the rendered files by the rendered programs: the controller's bootstrap installs
slurmctld, generates the munge key into the secret and powers up the static nodes; slurmctld runs
the rendered ResumeProgram, which launches the instances in moto and writes their names into the
fleet's Route 53 zone; the test plays EC2 booting each instance: a new host whose address is the
private address moto gave the instance, running the rendered bootstrap, which installs slurmd and
the client tools, learns its name from the instance metadata, sets hostname and search domain,
and starts slurmd.

Asserted: both nodes idle in sinfo; a two-node `sbatch --wait` whose script calls `srun` on the
nodes (a compute node needs slurm-client: issue 17, defect 1), resolves the batch host's short name
on the other node and the other node's on the batch host (the Route 53 zone as search domain:
defect 2). With the bootstrap of before issue 17 the job fails: no srun on the node, no name.

The network: a bridge in a "switch" namespace the test makes; each host a veth into it with a
/8 address in 10.0.0.0/8, the default route through 10.0.0.2. There, inside that namespace:
- 10.0.0.2:53, the VPC resolver's stand-in: answers A queries from the Route 53 zone in moto, and
  NXDOMAIN for every other name (nothing is forwarded anywhere);
- 169.254.169.254:80, the instance metadata service (IMDSv2): which instance asks is known by the
  asking address (moto's PrivateIpAddress of the instance), as on EC2;
- 10.0.0.2:5000, a TCP proxy to moto's server on 127.0.0.1 of the root namespace.
Nothing listens in or sends to the root namespace's network but moto on 127.0.0.1.

Test hooks (everything else runs as on an instance):
  1. The environment file carries AWS_ENDPOINT_URL (moto, through the proxy) and fake credentials,
     as in tests/test_cluster.py; the user data's download and sha256 check are not run: the
     rendered folder is put at its path in the host's file system before it boots.
  2. slurm.conf: ProctrackType=proctrack/linuxproc and TaskPlugin=task/none (no cgroup delegation
     in a namespace), SlurmdParameters=config_overrides (this host is not a p5.48xlarge),
     power_save_min_interval=0 (the resume starts at once), and no HealthCheckProgram and no GPU check in
     the Prolog (bin/health.json "prolog": false): these hosts have no GPUs, so bin/health and the Prolog
     would drain every node (tests/test_health_cluster.py and tests/test_prolog_cluster.py run them with fakes).
  3. The hosts run no systemd: the bootstrap starts the daemons itself (its path for a machine whose
     init is not systemd, sd_booted(3)), with `slurmd -b` (a namespace does not boot).
  4. /dev/nvidia0..7 are character devices 1:3 (/dev/null) standing in for the GPUs gres.conf names.
  5. The image has a policy-rc.d that exits 101 (no daemon starts at package install; no init) and
     an AWS CLI (awscli from PyPI in /opt/aws-cli) and the user `ubuntu` (UID 1000), as the
     default AMI brings them; jobs are submitted as that user (root's are refused: DisableRootJobs).
Everything stops by itself: each host's PID 1 is killed (so is all it ran), its namespaces and
mounts go with it; every wait has a timeout. In CI (CI set) a missing piece fails this test; the
image is cached in FLEETFORM_MULTIHOST_CACHE (default ~/.cache/fleetform/multihost).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

import awslocal
import e2e_checks
import multihost

pytestmark = pytest.mark.cluster

BLUEPRINT = awslocal.blueprint("2").replace("fleets:\n", """\
storage:
  - {name: shared, type: fsx-lustre, capacity_gib: 1200, throughput_mb_per_tib: 125, mount_path: /fsx}
fleets:
""") + """\
    storage: [shared]
    login: {nodes: 1, access: ssm}
    users:
      - {name: alice, uid: 2001, gid: 3000, group: ml}
    home: {storage: shared}
"""
"""The fleet has a login node, the user alice (uid 2001, group ml 3000) and homes on its FSx for Lustre
file system: every host gets a folder of the test bind-mounted at /fsx, the stand-in of that file
system (the environment file names no Lustre mount, so the bootstrap mounts nothing there)."""
LOGIN_USER, LOGIN_UID, LOGIN_GID = "alice", 2001, 3000
CLUSTER = awslocal.CLUSTER
CONTROLLER_ADDR = "10.0.0.10"
VPC_CIDR = "10.0.0.0/16"
SUBNET_CIDR = "10.0.1.0/24"  # the launch template names it; moto 5 still picks addresses in 10.0.0.0/8
MOTO_PORT = 5000
BUCKET = "a-config-test"
BOOT_S = 600  # a host's bootstrap: apt-get install from the local repository, then the daemons


@pytest.fixture(scope="module", autouse=True)
def need_components():
    awslocal.need(multihost.missing() or awslocal.available())


def _override(slurm: Path) -> None:
    """Hook 2 of the module docstring."""
    conf = slurm / "slurm.conf"
    out = []
    for line in conf.read_text().splitlines():
        key, _, _ = line.partition("=")
        if key == "ProctrackType":
            line = "ProctrackType=proctrack/linuxproc"
        elif key == "TaskPlugin":
            line = "TaskPlugin=task/none"
        elif key == "SlurmctldParameters":
            line = line.replace("power_save_min_interval=30", "power_save_min_interval=0")
        elif key.startswith("HealthCheck"):
            continue
        out.append(line)
    conf.write_text("\n".join(out + ["SlurmdParameters=config_overrides"]) + "\n")
    health = slurm / "bin" / "health.json"  # nor the Prolog's GPU check (bin/prolog, fleetform_jobcheck.py)
    health.write_text(json.dumps({**json.loads(health.read_text()), "prolog": False}, indent=2) + "\n")


class Imds(BaseHTTPRequestHandler):
    """IMDSv2 at 169.254.169.254 for whichever instance asks, by its address."""
    ec2 = None

    def log_message(self, *args):
        pass

    def _answer(self, code: int, body: str = "") -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_PUT(self):
        return self._answer(200, "imds-token") if self.path == "/latest/api/token" else self._answer(404)

    def do_GET(self):
        if self.headers.get("X-aws-ec2-metadata-token") != "imds-token":
            return self._answer(401)
        found = [i for r in self.ec2.describe_instances(Filters=[
            {"Name": "private-ip-address", "Values": [self.client_address[0]]},
            {"Name": "instance-state-name", "Values": ["pending", "running"]}])["Reservations"] for i in r["Instances"]]
        if len(found) != 1:
            return self._answer(404)
        instance = found[0]
        if self.path == "/latest/meta-data/instance-id":
            return self._answer(200, instance["InstanceId"])
        prefix = "/latest/meta-data/tags/instance/"
        if self.path.startswith(prefix):
            value = next((t["Value"] for t in instance.get("Tags", []) if t["Key"] == self.path[len(prefix):]), None)
            return self._answer(200, value) if value is not None else self._answer(404)
        return self._answer(404)


def _zone_lookup(route53, zone_id: str, zone: str):
    """The VPC resolver's answer for a name: A records of the private zone; None (NXDOMAIN) for
    names in no zone of this VPC."""
    def lookup(name: str) -> list[str] | None:
        if not name.endswith("." + zone):
            return None
        records = route53.list_resource_record_sets(HostedZoneId=zone_id)["ResourceRecordSets"]
        found = [v["Value"] for r in records if r["Name"].rstrip(".") == name and r["Type"] == "A"
                 for v in r["ResourceRecords"]]
        return found or (None if name != zone else [])
    return lookup


class Cluster:
    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.machines: dict[str, multihost.Machine] = {}
        self.boots: dict[str, object] = {}
        self.stopping = threading.Event()
        self.switch: multihost.Switch | None = None
        self.lock = threading.Lock()  # the controller's boot and EC2's may overlap
        self.errors: list[str] = []  # what went wrong in the thread playing EC2
        self.shared = tmp / "fsx"  # the shared file system's stand-in, at /fsx on every host
        self.shared.mkdir(parents=True, exist_ok=True)

    def boot(self, name: str, address: str, env_text: str, rendered: Path, program_dir: str, image: Path):
        """A new host: the image, the rendered folder at its path, its environment file, the
        resolver DHCP gives in a VPC (nameserver = the VPC's base + 2); then its bootstrap runs."""
        rendered_at = str(Path(program_dir).parents[2])
        machine = multihost.Machine(self.tmp / "hosts", name, image, {
            rendered_at: rendered, "/etc/fleetform/cluster.env": env_text,
            "/etc/resolv.conf": f"nameserver {multihost.SWITCH_ADDR}\n", "/etc/hosts": "127.0.0.1 localhost\n"},
            binds={"/fsx": self.shared})
        with self.lock:
            self.machines[name] = machine
            self.switch.plug(machine, address)
        log = open(self.tmp / f"{name}.bootstrap.log", "w")
        import subprocess

        self.boots[name] = subprocess.Popen(machine.command("python3", f"{program_dir}/bootstrap"), stdout=log,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        return machine

    def logs(self) -> str:
        out = [f"--- playing EC2: {e}" for e in self.errors]
        for log in sorted(self.tmp.glob("*.bootstrap.log")):
            out.append(f"--- {log.name}\n{log.read_text(errors='replace')[-3000:]}")
        for name, machine in self.machines.items():
            for path in ("/var/log/slurm/slurmctld.log", "/var/log/slurm/slurmd.log", "/var/log/fleetform/resume.log"):
                try:
                    out.append(f"--- {name}:{path}\n{machine.file(path).read_text(errors='replace')[-3000:]}")
                except OSError:
                    pass
        return "\n".join(out)

    def stop(self) -> None:
        self.stopping.set()
        for proc in self.boots.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for machine in self.machines.values():
            machine.stop()
        if self.switch is not None:
            self.switch.stop()


def _play_ec2(cluster: Cluster, ec2, env_text, rendered: Path, program_dir: str, image: Path) -> None:
    """EC2 booting the instances moto runs for this cluster: each a new host at its private address."""
    while not cluster.stopping.is_set():
        try:
            _boot_new_instances(cluster, ec2, env_text, rendered, program_dir, image)
        except Exception as error:  # noqa: BLE001 - shown with the logs when the test fails
            cluster.errors.append(repr(error))
        cluster.stopping.wait(0.5)


def _boot_new_instances(cluster: Cluster, ec2, env_text, rendered: Path, program_dir: str, image: Path) -> None:
    reservations = ec2.describe_instances(Filters=[{"Name": "tag:fleetform:cluster", "Values": [CLUSTER]},
                                                   {"Name": "tag:fleetform:role", "Values": ["compute"]}])
    for instance in (i for r in reservations["Reservations"] for i in r["Instances"]):
        iid, state = instance["InstanceId"], instance["State"]["Name"]
        if state in ("pending", "running") and iid not in cluster.machines:
            cluster.boot(iid, instance["PrivateIpAddress"], env_text("compute"), rendered, program_dir, image)
        elif state in ("shutting-down", "terminated") and iid in cluster.machines:
            cluster.machines[iid].stop()


@pytest.fixture(scope="module")
def cluster():
    image = multihost.image()
    tmp = Path(tempfile.mkdtemp(prefix="ff-mh-", dir="/tmp"))  # slurmstepd's socket paths must stay short
    state = Cluster(tmp)
    try:  # from here on, whatever fails, the finally below removes tmp and stops what started
        slurm = awslocal.render_fleet(tmp, BLUEPRINT)
        _override(slurm)
        program_dir = __import__("json").loads((slurm / "bin/fleet.json").read_text())["program_dir"]
        with awslocal.moto_server() as url:
            ec2, route53 = awslocal.client("ec2", url), awslocal.client("route53", url)
            vpc = ec2.create_vpc(CidrBlock=VPC_CIDR)["Vpc"]["VpcId"]
            subnet = ec2.create_subnet(VpcId=vpc, CidrBlock=SUBNET_CIDR)["Subnet"]["SubnetId"]
            template = ec2.create_launch_template(LaunchTemplateName="a-train", LaunchTemplateData={
                "ImageId": "ami-12c6146b", "InstanceType": "p5.48xlarge",
                "NetworkInterfaces": [{"DeviceIndex": 0, "SubnetId": subnet}]})["LaunchTemplate"]["LaunchTemplateId"]
            secret = awslocal.client("secretsmanager", url).create_secret(Name=f"{CLUSTER}-munge")["ARN"]
            # the artifact, as `pulumi up` uploads it: bin/prolog pins each job's files to a version of it
            s3 = awslocal.client("s3", url)
            s3.create_bucket(Bucket=BUCKET)
            s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
            awslocal.publish(s3, BUCKET, tmp / "rendered", (slurm / "slurm.conf", slurm / "bin" / "health.json"))
            zone = f"train.{CLUSTER}.fleetform.internal"  # providers/aws/training.py dns_zone_name
            zone_id = route53.create_hosted_zone(
                Name=zone, CallerReference="multihost", HostedZoneConfig={"PrivateZone": True},
                VPC={"VPCRegion": awslocal.REGION, "VPCId": vpc})["HostedZone"]["Id"].rsplit("/", 1)[-1]

            def env_text(role: str) -> str:
                return awslocal.cluster_env(
                    role, CLUSTER, "train", f"http://{multihost.SWITCH_ADDR}:{MOTO_PORT}",
                    FLEETFORM_MUNGE_SECRET=secret, FLEETFORM_LAUNCH_TEMPLATE=template,
                    FLEETFORM_CONTROLLER_ADDR=CONTROLLER_ADDR, FLEETFORM_DNS_ZONE=zone, FLEETFORM_DNS_ZONE_ID=zone_id,
                    FLEETFORM_CONFIG_BUCKET=BUCKET, FLEETFORM_CONFIG_KEY=awslocal.ARTIFACT_KEY)

            state.switch = multihost.Switch(tmp)
            port = int(url.rsplit(":", 1)[1])
            multihost.serve_tcp_proxy(state.switch, (multihost.SWITCH_ADDR, MOTO_PORT), ("127.0.0.1", port),
                                      state.stopping)
            multihost.serve_dns(state.switch, _zone_lookup(route53, zone_id, zone), state.stopping)
            multihost.serve_http(state.switch, (multihost.IMDS_ADDR, 80), type("Imds", (Imds,), {"ec2": ec2}),
                                 state.stopping)
            player = threading.Thread(target=_play_ec2, args=(state, ec2, env_text, tmp / "rendered", program_dir,
                                                              image), daemon=True)
            player.start()
            started = time.monotonic()
            controller = state.boot("controller", CONTROLLER_ADDR, env_text("controller"), tmp / "rendered",
                                    program_dir, image)
            try:
                code = state.boots["controller"].wait(BOOT_S)
            except Exception:  # noqa: BLE001 - reported below
                code = None
            assert code == 0, f"controller bootstrap: exit {code}\n{state.logs()}"
            yield {"state": state, "controller": controller, "ec2": ec2, "route53": route53, "zone": zone,
                   "zone_id": zone_id, "started": started, "subnet": subnet, "image": image,
                   "program_dir": program_dir, "rendered": tmp / "rendered", "env_text": env_text}
    finally:
        state.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def sinfo(controller) -> dict[str, str]:
    out = controller.run("sinfo", "-N", "-h", "-o", "%N %t", timeout=30).stdout
    return dict(line.split() for line in out.splitlines() if len(line.split()) == 2)


def wait_idle(cluster, nodes: set[str], timeout: float = 900) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while True:
        states = sinfo(cluster["controller"])
        if all(states.get(n) == "idle" for n in nodes):
            return states
        if time.monotonic() > deadline:
            raise AssertionError(f"nodes not idle after {timeout:.0f} s: {states}\n{cluster['state'].logs()}")
        time.sleep(2)


JOB = """#!/bin/bash
set -eu
me=$(hostname)
other=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | grep -vx "$me")
echo "batch host $me, other $other"
srun -N2 --ntasks-per-node=1 --label hostname
echo "on $other:"; srun -N1 -n1 -w "$other" getent hosts "$me"
echo "on $me:"; srun -N1 -n1 -w "$me" getent hosts "$other"
"""


def test_a_two_node_batch_job_runs_srun_and_resolves_node_names(cluster):
    controller = cluster["controller"]
    wait_idle(cluster, {"train-001", "train-002"})
    idle_after = time.monotonic() - cluster["started"]
    nodes = {name: m for name, m in cluster["state"].machines.items() if name.startswith("i-")}
    assert len(nodes) == 2, nodes
    records = {r["Name"].rstrip("."): r["ResourceRecords"][0]["Value"] for r in
               cluster["route53"].list_resource_record_sets(HostedZoneId=cluster["zone_id"])["ResourceRecordSets"]
               if r["Type"] == "A"}
    controller.file("/tmp/job.sh").write_text(JOB)
    controller.file("/tmp/job.sh").chmod(0o755)
    # submitted as a job's user: slurm.conf refuses root's jobs (DisableRootJobs=YES)
    batch = controller.run("runuser", "-u", multihost.JOB_USER, "--", "sbatch", "--wait", "-N2", "--chdir=/tmp",
                           "--output=/tmp/job-%j.out", "/tmp/job.sh", timeout=300)
    outputs = {name: "".join(p.read_text() for p in m.file("/tmp").glob("job-*.out")) for name, m in nodes.items()}
    out = "".join(outputs.values())
    assert batch.returncode == 0, f"{batch.stdout}{batch.stderr}\n{out}\n{cluster['state'].logs()}"
    me, other = re.search(r"batch host (\S+), other (\S+)", out).groups()
    assert sorted(re.findall(r"^\d+: (train-\d+)$", out, re.M)) == ["train-001", "train-002"], out
    address = {n: records[f"{n}.{cluster['zone']}"] for n in (me, other)}
    # getent prints the address and the name it found: <ip> <name>.<zone>
    assert re.search(rf"on {other}:\n{re.escape(address[me])}\s+{me}\.{re.escape(cluster['zone'])}", out), out
    assert re.search(rf"on {me}:\n{re.escape(address[other])}\s+{other}\.{re.escape(cluster['zone'])}", out), out
    # each host has only what its bootstrap installed: no Slurm in the image, the client on the node
    image_root = multihost.image()
    assert not (image_root / "usr/bin/srun").exists() and not (image_root / "usr/sbin/slurmd").exists()
    for machine in nodes.values():
        assert machine.file("/usr/bin/srun").exists(), "the node's bootstrap did not install srun"
        assert "search " + cluster["zone"] in machine.file("/etc/resolv.conf").read_text()
    addresses = {records[f"train-00{i}.{cluster['zone']}"] for i in (1, 2)}
    assert addresses == {i["PrivateIpAddress"] for r in cluster["ec2"].describe_instances(Filters=[
        {"Name": "tag:fleetform:cluster", "Values": [CLUSTER]}])["Reservations"] for i in r["Instances"]}

    # the end-to-end checks a user runs on AWS after `pulumi up` (tests/test_aws_e2e.py), here
    for check in (c for c in e2e_checks.CHECKS if not c.needs):
        ran = controller.run("bash", "-c", e2e_checks.script(check, 2), timeout=900)
        assert ran.returncode == 0, f"{check.name}:\n{ran.stdout}{ran.stderr}"
    print(f"multihost: nodes idle {idle_after:.0f} s after the controller's boot began")


LOGIN_JOB = """#!/bin/bash
set -eu
echo "batch $(hostname) $(id -un) $(id -u) $(id -g) $(id -gn) home $HOME"
srun -N1 -n1 bash -c 'id -u > "$HOME/step-$(hostname).txt"'
"""


def test_a_login_node_submits_and_the_job_runs_as_the_blueprint_user_in_the_shared_home(cluster):
    """A login host made as the Pulumi program makes it (an instance tagged role login, its name in
    `fleetform:node`), booted with FLEETFORM_ROLE=login: its bootstrap installs the client tools and
    munge, no slurmd; slurm.conf has no NodeName line for it. alice submits there; the job runs on a
    compute host as alice (uid, gid, group by name: the bootstrap made her with the same ids on every
    host) and writes into her home on the shared file system (/fsx/home/alice)."""
    state, ec2 = cluster["state"], cluster["ec2"]
    wait_idle(cluster, {"train-001", "train-002"})
    instance = ec2.run_instances(
        ImageId="ami-12c6146b", InstanceType="m7i.xlarge", MinCount=1, MaxCount=1, SubnetId=cluster["subnet"],
        TagSpecifications=[{"ResourceType": "instance", "Tags": [
            {"Key": "fleetform:cluster", "Value": CLUSTER}, {"Key": "fleetform:fleet", "Value": "train"},
            {"Key": "fleetform:role", "Value": "login"}, {"Key": "fleetform:node", "Value": "train-login-1"}]}],
    )["Instances"][0]
    started = time.monotonic()
    login = state.boot("login", instance["PrivateIpAddress"], cluster["env_text"]("login"), cluster["rendered"],
                       cluster["program_dir"], cluster["image"])
    code = state.boots["login"].wait(BOOT_S)
    assert code == 0, f"login bootstrap: exit {code}\n{state.logs()}"
    booted = time.monotonic() - started
    assert login.run("hostname").stdout.strip() == "train-login-1"
    assert login.file("/usr/bin/sbatch").exists() and login.file("/usr/bin/srun").exists()
    assert not login.file("/usr/sbin/slurmd").exists(), "a login node runs no slurmd"
    assert "train-login" not in (cluster["rendered"] / "train/slurm/slurm.conf").read_text()
    for host in (login, cluster["controller"], *(m for n, m in state.machines.items() if n.startswith("i-"))):
        ids = host.run("id", LOGIN_USER).stdout
        assert f"uid={LOGIN_UID}({LOGIN_USER}) gid={LOGIN_GID}(ml)" in ids, (host.name, ids)
    login.file("/tmp/login-job.sh").write_text(LOGIN_JOB)
    login.file("/tmp/login-job.sh").chmod(0o755)
    home = f"/fsx/home/{LOGIN_USER}"
    batch = login.run("runuser", "-u", LOGIN_USER, "--", "sbatch", "--wait", "-N1", f"--chdir={home}",
                      f"--output={home}/job-%j.out", "/tmp/login-job.sh", timeout=300)
    shared_home = state.shared / "home" / LOGIN_USER
    out = "".join(p.read_text() for p in shared_home.glob("job-*.out"))
    assert batch.returncode == 0, f"{batch.stdout}{batch.stderr}\n{out}\n{state.logs()}"
    found = re.search(r"^batch (train-\d+) (\S+) (\d+) (\d+) (\S+) home (\S+)$", out, re.M)
    assert found and found.groups()[1:] == (LOGIN_USER, str(LOGIN_UID), str(LOGIN_GID), "ml", home), out
    step = shared_home / f"step-{found.group(1)}.txt"
    assert step.read_text().strip() == str(LOGIN_UID)
    assert (step.stat().st_uid, step.stat().st_gid) == (LOGIN_UID, LOGIN_GID)
    assert (shared_home.stat().st_uid, shared_home.stat().st_mode & 0o777) == (LOGIN_UID, 0o700)
    # srun from the login host itself: the node's slurmd connects back to it for the step's I/O
    direct = login.run("runuser", "-u", LOGIN_USER, "--", "srun", "-N1", "-n1", "id", "-u", timeout=120)
    assert direct.returncode == 0 and direct.stdout.strip() == str(LOGIN_UID), f"{direct.stdout}{direct.stderr}"
    print(f"multihost: login node booted in {booted:.0f} s")
