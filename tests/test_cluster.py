"""A real Slurm cluster on 127.0.0.1, formed by the rendered files and the rendered programs of an
AWS training fleet: Debian's munged, slurmctld and slurmd (slurm-wlm 22.05, so the blueprint
targets Slurm 22.05 and the bootstrap's version check passes), the AWS side served by moto's server
(the munge secret, the launch template, EC2) and a fake IMDS (tests/awslocal.py).

What runs as it would on AWS: the controller's bootstrap generates the munge key into the empty
secret, installs the Slurm files, starts munge and slurmctld and powers up the static nodes;
slurmctld runs the rendered ResumeProgram, which launches instances in moto and names them by tag.
The harness plays EC2 booting an instance: for each instance moto runs for this cluster, it runs
the rendered bootstrap with that instance's metadata (the fake IMDS); the bootstrap waits for its
node tag, reads the munge key from the secret and starts `slurmd -N <name>`. Then `sinfo` shows
the nodes idle, `srun` and `sbatch --wait` run jobs on them (each task sees the fleet's nccl.env),
and a job asking for a third node makes slurmctld resume an elastic node through the same path.

Test-only overrides, applied to the rendered folder before anything runs (one machine plays all):
  1. SlurmctldHost=localhost: the test machine's hostname cannot become `train-controller`.
  2. SlurmUser = the current user; SlurmctldPort and one slurmd Port= per node are free ports
     (several slurmd on one host; each NodeName line split into one line per node).
  3. ProctrackType=proctrack/linuxproc, TaskPlugin=task/none: no cgroup delegation in a test
     container (cgroup.conf is then unused).
  4. SlurmdParameters=config_overrides: this host has 2 CPUs, not a p5.48xlarge's 192.
  5. gres.conf File= names links to /dev/null in the temp dir instead of /dev/nvidia[0-7].
  6. power_save_min_interval=0 instead of 30, so a resume starts within a second.
  7. No HealthCheckProgram and no GPU check in the Prolog (bin/health.json "prolog": false): this host has
     no GPUs, so bin/health and the Prolog would drain every node (tests/test_health_cluster.py and
     tests/test_prolog_cluster.py run them with fakes).
  8. SuspendTimeout=20 instead of 300: a node powered down may be resumed once it has passed, and the
     rendered SuspendProgram has terminated its instance in moto within a second or two
     (tests/test_pool_cluster.py powers a lent node down and brings it back).
  9. (in the bootstrap, with FLEETFORM_ROOT) `slurmd -b`: slurmd reports its start as the boot,
     as a fresh instance would; this host booted before the resume and slurmctld would wait.
The user data's own part (download the artifact, check sha256, extract) is train-aws's; here the
programs run from the rendered folder directly. FLEETFORM_ROOT moves /etc, /var and /run of each
machine into the temp dir (the bootstrap then starts daemons itself instead of through systemd).
Everything stops by itself: fixtures kill every daemon through its pid file, and every wait has a
timeout. In CI (CI set) a missing daemon, moto or the aws CLI fails these tests.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import hostlist
import pytest

import awslocal

pytestmark = pytest.mark.cluster

BLUEPRINT = awslocal.blueprint("{min: 2, max: 3}")
CLUSTER = awslocal.CLUSTER
BUCKET = "a-config-test"
ARTIFACT_KEY = awslocal.ARTIFACT_KEY
DAEMONS = ("munged", "slurmctld", "slurmd", "sinfo", "srun", "sbatch", "scontrol")
LUSTRE = "fs-0123.fsx.us-east-1.amazonaws.com@tcp:/abcd=/fsx"  # not mounted here (FLEETFORM_ROOT)
SBIN = ("/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin")


def _missing() -> str | None:
    gone = [d for d in DAEMONS if not (shutil.which(d) or any(os.access(f"{p}/{d}", os.X_OK) for p in SBIN))]
    if gone:
        return f"{', '.join(gone)} not installed (apt-get install munge slurmctld slurmd slurm-client)"
    return awslocal.available()


@pytest.fixture(scope="module", autouse=True)
def need_components():
    awslocal.need(_missing())


def _override(slurm: Path, tmp: Path, ports: dict[str, int]) -> None:
    """The test-only overrides listed in the module docstring, on the rendered folder; `ports` keeps
    each node's port (and the controller's) the same across the renders of one test cluster. The
    manifest is written again for the overridden files (the test publishes what it runs)."""
    conf = slurm / "slurm.conf"
    out = []
    for line in conf.read_text().splitlines():
        key, _, value = line.partition("=")
        if key == "SlurmctldHost":
            line = "SlurmctldHost=localhost"
        elif key == "SlurmUser":
            line = f"SlurmUser={getpass.getuser()}"
        elif key == "DisableRootJobs" and os.geteuid() == 0:
            line = "DisableRootJobs=NO"  # the test submits as its own user, root in CI
        elif key == "ProctrackType":
            line = "ProctrackType=proctrack/linuxproc"
        elif key == "TaskPlugin":
            line = "TaskPlugin=task/none"
        elif key == "SlurmctldParameters":
            line = line.replace("power_save_min_interval=30", "power_save_min_interval=0")
        elif key == "SuspendTimeout":
            line = "SuspendTimeout=20"
        elif key.startswith("HealthCheck"):
            continue
        elif key == "NodeName":
            names = hostlist.expand_hostlist(value.split()[0])
            rest = value.split(" ", 1)[1]
            out += [f"NodeName={n} {rest} Port={ports.setdefault(n, awslocal.free_port())}" for n in names]
            continue
        out.append(line)
    out += [f"SlurmctldPort={ports.setdefault('slurmctld', awslocal.free_port())}", "SlurmdParameters=config_overrides"]
    conf.write_text("\n".join(out) + "\n")
    devices = tmp / "dev"
    if not devices.exists():
        devices.mkdir()
        for i in range(8):  # slurmd wants character devices: links to /dev/null are
            (devices / f"nvidia{i}").symlink_to("/dev/null")
    gres = slurm / "gres.conf"
    gres.write_text(re.sub(r"File=/dev/nvidia", f"File={devices}/nvidia", gres.read_text()))
    health = slurm / "bin" / "health.json"  # 7: nor the Prolog's GPU check (bin/prolog, fleetform_jobcheck.py)
    if health.exists():
        health.write_text(json.dumps({**json.loads(health.read_text()), "prolog": False}, indent=2) + "\n")
    rendered = slurm.parents[1]
    manifest = json.loads((rendered / "manifest.json").read_text())
    for name in ("slurm.conf", "gres.conf", "bin/health.json"):
        relative = str((slurm / name).relative_to(rendered))
        manifest["files"][relative] = hashlib.sha256((slurm / name).read_bytes()).hexdigest()
    (rendered / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def _publish(s3, rendered: Path) -> str:
    """What `pulumi up` does with a render (awslocal.publish); returns the new S3 version id."""
    return awslocal.publish(s3, BUCKET, rendered)


def _user_data(s3, root: Path) -> Path:
    """The user data's own part on a machine: the artifact's current version downloaded, every file
    checked against manifest.json, extracted at /opt/fleetform/rendered (under the machine's root)."""
    import io
    import tarfile

    target = root / "opt/fleetform/rendered"
    data = s3.get_object(Bucket=BUCKET, Key=ARTIFACT_KEY)["Body"].read()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(target, filter="data")
    listed = json.loads((target / "manifest.json").read_text())["files"]
    for name, digest in listed.items():
        assert hashlib.sha256((target / name).read_bytes()).hexdigest() == digest, name
    return target / "train" / "slurm" / "bin"


class Machines:
    """Every machine of the test cluster: its FLEETFORM_ROOT, and the daemons it started."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.roots: dict[str, Path] = {}
        self.boots: dict[str, subprocess.Popen] = {}
        self.stopping = threading.Event()

    def root(self, name: str) -> Path:
        root = self.tmp / "machines" / name
        root.mkdir(parents=True, exist_ok=True)
        self.roots[name] = root
        return root

    def stop_daemons(self, root: Path) -> None:
        for pid_file in ("run/slurmd.pid", "run/slurmctld.pid", "run/munge/munged.pid"):
            file = root / pid_file
            try:
                pid = int(file.read_text().split()[0])
                os.kill(pid, signal.SIGTERM)
            except (OSError, ValueError, IndexError):
                continue
            for _ in range(50):
                try:
                    os.kill(pid, 0)
                except OSError:
                    break
                time.sleep(0.1)
            else:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass

    def stop(self) -> None:
        self.stopping.set()
        for proc in self.boots.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        for root in self.roots.values():
            self.stop_daemons(root)
        self.stop_leftovers()

    def stop_leftovers(self) -> None:
        """slurmstepd (the step daemons of jobs still running, such as the day-2 test's) outlives
        slurmd: every process whose environment names this test's folder is killed, so nothing of the
        cluster runs on after the test."""
        marker = str(self.tmp).encode()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                if marker in (entry / "environ").read_bytes():
                    os.kill(int(entry.name), signal.SIGKILL)
            except OSError:
                continue


def _env(root: Path, env_file: Path, **extra: str) -> dict[str, str]:
    return {"FLEETFORM_ROOT": str(root), "FLEETFORM_ENV_FILE": str(env_file), "HOME": str(root),
            "PATH": os.environ.get("PATH", "/usr/bin:/bin") + ":/usr/sbin", **extra}


def _play_ec2(machines: Machines, moto_url: str, imds: str, env_text) -> None:
    """EC2 booting instances: every instance moto runs for this cluster gets the user data's part
    (the artifact's current version from S3) and the bootstrap run with its metadata; a terminated
    one loses its daemons."""
    ec2 = awslocal.client("ec2", moto_url)
    s3 = awslocal.client("s3", moto_url)
    while not machines.stopping.is_set():
        reservations = ec2.describe_instances(Filters=[
            {"Name": "tag:fleetform:cluster", "Values": [CLUSTER]},
            {"Name": "tag:fleetform:role", "Values": ["compute"]}])["Reservations"]
        for instance in (i for r in reservations for i in r["Instances"]):
            iid, state = instance["InstanceId"], instance["State"]["Name"]
            if state in ("pending", "running") and iid not in machines.boots:
                root = machines.root(iid)
                env_file = root / "etc/fleetform/cluster.env"
                env_file.parent.mkdir(parents=True, exist_ok=True)
                env_file.write_text(env_text("compute"))
                bin_dir = _user_data(s3, root)
                log = open(root / "bootstrap.log", "w")
                machines.boots[iid] = subprocess.Popen(
                    [sys.executable, str(bin_dir / "bootstrap")], stdout=log, stderr=subprocess.STDOUT,
                    env=_env(root, env_file, AWS_EC2_METADATA_SERVICE_ENDPOINT=f"{imds}/{iid}"))
            elif state in ("shutting-down", "terminated") and iid in machines.roots:
                machines.stop_daemons(machines.roots.pop(iid))
        machines.stopping.wait(0.5)


@pytest.fixture(scope="module")
def short_tmp():
    """slurmstepd's socket path (<SlurmdSpoolDir>/<node>_<job>.<step>) must fit in 108 bytes: pytest's
    temp dirs are too deep."""
    tmp = Path(tempfile.mkdtemp(prefix="ff-", dir="/tmp"))
    yield tmp
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def cluster(short_tmp):
    tmp = short_tmp
    (tmp / "v1").mkdir()
    slurm = awslocal.render_fleet(tmp / "v1", BLUEPRINT)
    ports: dict[str, int] = {}
    _override(slurm, tmp, ports)
    machines = Machines(tmp)
    with awslocal.moto_server() as url, awslocal.fake_imds(url) as imds:
        ec2 = awslocal.client("ec2", url)
        s3 = awslocal.client("s3", url)
        s3.create_bucket(Bucket=BUCKET)
        s3.put_bucket_versioning(Bucket=BUCKET, VersioningConfiguration={"Status": "Enabled"})
        _publish(s3, slurm.parents[1])
        template = ec2.create_launch_template(LaunchTemplateName="a-train", LaunchTemplateData={
            "ImageId": "ami-12c6146b", "InstanceType": "p5.48xlarge"})["LaunchTemplate"]["LaunchTemplateId"]
        secret = awslocal.client("secretsmanager", url).create_secret(Name=f"{CLUSTER}-munge")["ARN"]

        def env_text(role: str) -> str:
            return awslocal.cluster_env(role, CLUSTER, "train", url, FLEETFORM_MUNGE_SECRET=secret,
                                        FLEETFORM_AWS_CLI=awslocal.aws_cli(), FLEETFORM_LAUNCH_TEMPLATE=template,
                                        FLEETFORM_LUSTRE_MOUNTS=LUSTRE, FLEETFORM_CONFIG_BUCKET=BUCKET,
                                        FLEETFORM_CONFIG_KEY=ARTIFACT_KEY)

        root = machines.root("controller")
        env_file = root / "etc/fleetform/cluster.env"
        env_file.parent.mkdir(parents=True)
        env_file.write_text(env_text("controller"))
        bin_dir = _user_data(s3, root)
        ec2_thread = threading.Thread(target=_play_ec2, args=(machines, url, imds, env_text), daemon=True)
        ec2_thread.start()
        try:
            boot = subprocess.run([sys.executable, str(bin_dir / "bootstrap")], capture_output=True,
                                  text=True, env=_env(root, env_file), timeout=180)
            assert boot.returncode == 0, boot.stderr + _logs(machines)
            yield {"conf": root / "etc/slurm/slurm.conf", "machines": machines, "ec2": ec2, "boot": boot,
                   "bin": bin_dir, "s3": s3, "ports": ports, "tmp": tmp, "imds": imds}
        finally:
            machines.stop()
            ec2_thread.join(10)


def _logs(machines: Machines) -> str:
    out = []
    for name, root in machines.roots.items():
        for log in sorted(root.rglob("*.log")):
            out.append(f"--- {name} {log.relative_to(root)}\n" + log.read_text(errors="replace")[-2000:])
    return "\n".join(out)


def slurm(cluster, *command: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=cluster["conf"].parent,
                          env={**os.environ, "SLURM_CONF": str(cluster["conf"])})


def wait_idle(cluster, nodes: set[str], timeout: float = 150) -> dict[str, str]:
    deadline = time.monotonic() + timeout
    while True:
        out = slurm(cluster, "sinfo", "-N", "-h", "-o", "%N %t").stdout
        states = dict(line.split() for line in out.splitlines() if line.strip())
        if all(states.get(n) == "idle" for n in nodes):
            return states
        if time.monotonic() > deadline:
            raise AssertionError(f"nodes not idle after {timeout:.0f} s: {states}\n" + _logs(cluster["machines"]))
        time.sleep(1)


def test_static_nodes_boot_register_and_run_srun_and_sbatch(cluster):
    assert "generated a 1024-byte munge key" in cluster["boot"].stderr
    # the controller takes the FSx mounts too (jobs are submitted from /fsx there); with
    # FLEETFORM_ROOT it only says so (tests/test_bootstrap_machine.py runs the real mount step)
    assert "not mounted at /fsx" in cluster["boot"].stderr
    states = wait_idle(cluster, {"train-001", "train-002"})
    assert states.get("train-003") in ("idle~", "idle"), states  # the elastic node stays powered down
    names = cluster["ec2"].describe_tags(Filters=[{"Name": "key", "Values": ["fleetform:node"]}])["Tags"]
    assert sorted(t["Value"] for t in names) == ["train-001", "train-002"]

    ran = slurm(cluster, "srun", "-N2", "--nodelist=train-[001-002]", "--ntasks-per-node=1", "--label",
                "printenv", "SLURMD_NODENAME", "NCCL_DEBUG")
    assert ran.returncode == 0, ran.stderr + _logs(cluster["machines"])
    assert sorted(ran.stdout.split()) == sorted(["0:", "0:", "1:", "1:", "train-001", "train-002", "WARN", "WARN"]), \
        ran.stdout

    out = cluster["conf"].parent / "batch.out"
    batch = slurm(cluster, "sbatch", "--wait", "-N2", "--nodelist=train-[001-002]", f"--output={out}", "--wrap",
                  "srun --ntasks-per-node=1 printenv SLURMD_NODENAME")
    assert batch.returncode == 0, batch.stderr
    assert sorted(out.read_text().split()) == ["train-001", "train-002"]


def test_a_job_for_more_nodes_resumes_an_elastic_node(cluster):
    wait_idle(cluster, {"train-001", "train-002"})
    ran = slurm(cluster, "srun", "-N3", "--ntasks-per-node=1", "printenv", "SLURMD_NODENAME", timeout=200)
    assert ran.returncode == 0, ran.stderr + _logs(cluster["machines"])
    assert sorted(ran.stdout.split()) == ["train-001", "train-002", "train-003"]
    live = cluster["ec2"].describe_instances(Filters=[{"Name": "tag:fleetform:node", "Values": ["train-003"]},
                                                      {"Name": "instance-state-name", "Values": ["running"]}])
    assert len([i for r in live["Reservations"] for i in r["Instances"]]) == 1


BLUEPRINT_DAY2 = awslocal.blueprint("{min: 3, max: 3}").replace(
    "partitions: [{name: gpu, default: true}]", "partitions: [{name: gpu, default: true}, {name: debug}]") + \
    "    nccl: {debug: INFO}\n"
"""Day 2, first change: 2 -> 3 static nodes (train-003 was elastic), a new partition, an NCCL
variable changed (NCCL_DEBUG WARN -> INFO). The node list stays: `scontrol reconfigure` applies it."""
BLUEPRINT_DAY2_NODES = BLUEPRINT_DAY2.replace("{min: 3, max: 3}", "{min: 4, max: 4}")
"""Day 2, second change: a node added (train-004): slurmctld and the slurmds restart."""


def _node_update(cluster, iid: str) -> subprocess.CompletedProcess:
    """A compute node's fleetform-update timer firing: its own bin/update, with its metadata."""
    root = cluster["machines"].roots[iid]
    return subprocess.run(
        [sys.executable, str(root / "opt/fleetform/rendered/train/slurm/bin/update")], capture_output=True,
        text=True, timeout=180, env={**_env(root, root / "etc/fleetform/cluster.env"),
                                     "SLURM_CONF": str(root / "etc/slurm/slurm.conf"),
                                     "AWS_EC2_METADATA_SERVICE_ENDPOINT": f"{cluster['imds']}/{iid}"})


def _live_nodes(cluster) -> dict[str, str]:
    """node name -> instance id of the live compute instances that have a running machine."""
    live = cluster["ec2"].describe_instances(Filters=[{"Name": "tag:fleetform:cluster", "Values": [CLUSTER]},
                                                      {"Name": "instance-state-name", "Values": ["running"]}])
    return {t["Value"]: i["InstanceId"] for r in live["Reservations"] for i in r["Instances"] for t in i["Tags"]
            if t["Key"] == "fleetform:node" and i["InstanceId"] in cluster["machines"].roots}


def _publish_and_keep(cluster, name: str, blueprint: str) -> str:
    """A new render published to moto's S3 as `pulumi up` would, then one keeper round on the
    controller; the controller's update log. The nodes' timers have not run yet."""
    tmp = cluster["tmp"]
    (tmp / name).mkdir()
    new = awslocal.render_fleet(tmp / name, blueprint)
    _override(new, tmp, cluster["ports"])
    _publish(cluster["s3"], new.parents[1])
    root = cluster["machines"].roots["controller"]
    kept = subprocess.run([sys.executable, str(cluster["bin"] / "keeper")], capture_output=True, text=True,
                          timeout=300, env={**_env(root, root / "etc/fleetform/cluster.env"),
                                            "SLURM_CONF": str(cluster["conf"])})
    assert kept.returncode == 0, kept.stderr
    return (root / "var/log/fleetform/update.log").read_text()


def _nodes_update(cluster) -> None:
    for node, iid in _live_nodes(cluster).items():  # each node's timer
        updated = _node_update(cluster, iid)
        assert updated.returncode == 0, f"{node}: {updated.stderr}"


def _node_files(cluster, expected: str) -> None:
    for name, iid in _live_nodes(cluster).items():  # every node runs the new files
        node = cluster["machines"].roots[iid]
        assert expected in (node / "opt/fleetform/rendered/train/nccl.env").read_text(), name
        assert "PartitionName=debug" in (node / "etc/slurm/slurm.conf").read_text(), name


def test_day2_a_changed_blueprint_reaches_the_running_cluster_without_killing_a_job(cluster):
    """Issue 17 item 3. A job runs on train-[001-002]; the blueprint changes (2 -> 3 static nodes, a
    partition, NCCL_DEBUG WARN -> INFO) and the new artifact is published to S3; the controller's
    keeper and the nodes' update timers (run here once each) apply it. Then sinfo/scontrol show the
    new partition and static nodes, the nodes' files are the new ones, a new job's tasks see the new
    NCCL_DEBUG on every node, and the job that ran before still runs and its next step still sees the
    old value on both its nodes. A second change adds a node (slurmctld restarts): it is powered up
    and joins, and the job still runs."""
    wait_idle(cluster, {"train-001", "train-002"})
    tmp = cluster["tmp"]
    out, go = tmp / "long.out", tmp / "long.go"
    # its second step starts only after the update, without the batch script's environment (which
    # the batch step's TaskProlog already filled): a job's later steps keep the version it started with
    long = slurm(cluster, "sbatch", "--parsable", "-N2", "--nodelist=train-[001-002]", "--mem=100",
                 f"--output={out}", "--wrap", f"srun --ntasks-per-node=1 printenv NCCL_DEBUG; "
                 f"while [ ! -e {go} ]; do sleep 0.5; done; "
                 f"srun --export=NONE --ntasks-per-node=1 /usr/bin/printenv NCCL_DEBUG; sleep 900")
    assert long.returncode == 0, long.stderr
    job = long.stdout.strip().split(";")[0]
    deadline = time.monotonic() + 60
    while not (out.exists() and len(out.read_text().split()) == 2):
        assert time.monotonic() < deadline, slurm(cluster, "squeue").stdout + _logs(cluster["machines"])
        time.sleep(0.5)
    assert out.read_text().split() == ["WARN", "WARN"]

    updated = _publish_and_keep(cluster, "v2", BLUEPRINT_DAY2)
    assert "scontrol reconfigure" in updated, updated + _logs(cluster["machines"])
    partition = slurm(cluster, "scontrol", "show", "partition", "debug")
    assert partition.returncode == 0 and "Nodes=train-[001-003]" in partition.stdout, partition.stdout + partition.stderr
    assert {"debug", "gpu*"} <= set(slurm(cluster, "sinfo", "-h", "-o", "%P").stdout.split())
    config = slurm(cluster, "scontrol", "show", "config").stdout  # train-003 is static now: never suspended
    assert re.search(r"^SuspendExcNodes\s*=\s*train-\[001-003\]\s*$", config, re.M), config

    # a job started now gets the new nccl.env on every node, though no node's timer has run yet
    wait_idle(cluster, {"train-003"})
    ran = slurm(cluster, "srun", "-N3", "--mem=100", "--ntasks-per-node=1", "--label", "printenv", "NCCL_DEBUG",
                timeout=200)
    assert ran.returncode == 0, ran.stderr + _logs(cluster["machines"])
    assert sorted(ran.stdout.split()) == ["0:", "1:", "2:", "INFO", "INFO", "INFO"], ran.stdout
    _nodes_update(cluster)
    _node_files(cluster, "NCCL_DEBUG=INFO")
    go.touch()
    deadline = time.monotonic() + 60
    while len(out.read_text().split()) < 4:
        assert time.monotonic() < deadline, out.read_text() + _logs(cluster["machines"])
        time.sleep(0.5)
    assert out.read_text().split() == ["WARN"] * 4, out.read_text()  # the running job keeps its version

    updated = _publish_and_keep(cluster, "v3", BLUEPRINT_DAY2_NODES)
    _nodes_update(cluster)
    assert "slurmctld restarted: nodes added train-004" in updated, updated + _logs(cluster["machines"])
    assert "powered up the static nodes added: train-004" in updated, updated
    wait_idle(cluster, {"train-003", "train-004"}, timeout=200)
    assert "Nodes=train-[001-004]" in slurm(cluster, "scontrol", "show", "partition", "debug").stdout
    assert slurm(cluster, "squeue", "-h", "-j", job, "-o", "%T").stdout.strip() == "RUNNING"
    ran = slurm(cluster, "srun", "-N2", "--nodelist=train-[003-004]", "--mem=100", "--ntasks-per-node=1",
                "printenv", "NCCL_DEBUG", timeout=200)
    assert ran.returncode == 0 and ran.stdout.split() == ["INFO", "INFO"], ran.stdout + ran.stderr
    slurm(cluster, "scancel", job)


def test_keeper_replaces_a_static_node_that_went_down(cluster):
    """train-002 goes DOWN while its instance runs (a dead slurmd looks the same to slurmctld):
    the keeper terminates its instance and powers it down, so that, once SuspendTimeout has passed,
    its next round powers it up and the ResumeProgram starts a fresh instance under the same name
    (that last step is test_keeper_powers_up_static_nodes in test_slurm_programs.py)."""
    wait_idle(cluster, {"train-001", "train-002"})
    ec2 = cluster["ec2"]
    live = {"Name": "instance-state-name", "Values": ["pending", "running"]}
    node = {"Name": "tag:fleetform:node", "Values": ["train-002"]}
    (before,) = [i["InstanceId"] for r in ec2.describe_instances(Filters=[node, live])["Reservations"]
                 for i in r["Instances"]]
    down = slurm(cluster, "scontrol", "update", "nodename=train-002", "state=down", "reason=test: slurmd died")
    assert down.returncode == 0, down.stderr
    root = cluster["machines"].roots["controller"]
    kept = subprocess.run([sys.executable, str(cluster["bin"] / "keeper")], capture_output=True, text=True,
                          timeout=120, env={**_env(root, root / "etc/fleetform/cluster.env"),
                                            "SLURM_CONF": str(cluster["conf"])})
    assert kept.returncode == 0, kept.stderr
    assert not ec2.describe_instances(Filters=[node, live])["Reservations"], "its instance still runs"
    assert ec2.describe_instances(InstanceIds=[before])["Reservations"][0]["Instances"][0]["State"]["Name"] in (
        "shutting-down", "terminated")
    state = slurm(cluster, "scontrol", "show", "node", "train-002").stdout
    assert "POWER" in state.split("State=")[1].split()[0] and "fleetform keeper" in state, state
    states = dict(line.split() for line in slurm(cluster, "sinfo", "-N", "-h", "-o", "%N %t").stdout.splitlines())
    assert states["train-001"] == "idle" and states["train-002"] in ("idle%", "down%", "idle~", "down~"), states
