"""Several machines on one host for tests/test_multihost.py: each a network, UTS, mount and PID
namespace the test makes, with its own root file system (an overlay over a clean Debian 12 root
made by `debootstrap`), hostname, address, /etc/hosts and resolver; all of them on a bridge inside
a "switch" namespace the test also makes. Nothing here touches the root namespace's network.

- `image()`: the machines' image, built once and cached (FLEETFORM_MULTIHOST_CACHE, default
  ~/.cache/fleetform/multihost; reused when present, never required): `debootstrap --variant=minbase
  --include=python3,ca-certificates bookworm` (the stand-in of an AMI without Slurm), the AWS CLI (an
  AMI such as AWS's DLAMI brings one; here awscli from PyPI in /opt/aws-cli, because Debian 12's
  awscli 2.9 ignores AWS_ENDPOINT_URL), `policy-rc.d` exiting 101 (no daemon starts at install, as in
  Debian's container images: there is no init here to start them), and a local apt repository in
  /srv/fleetform-apt holding Debian 12's slurmctld, slurmd, slurm-client and munge with every
  dependency the minbase root lacks, downloaded beforehand. The image's only apt source is that
  repository: the machines have no Internet, and the bootstrap's real `apt-get install` installs
  from it. Nothing of Slurm or munge is in the image itself.
- `Switch`: the namespace with the bridge. Its address 10.0.0.2 is the VPC resolver's (the VPC
  CIDR's base plus two, Amazon VPC User Guide, "Amazon DNS server"); 169.254.169.254 is on it too.
- `Machine`: one host; PID 1 of its PID namespace is a small reaper, so killing it ends everything
  the machine ran; its overlay and mounts live only in its mount namespace.
- `serve_in(switch, ...)`: a server socket bound inside the switch namespace by a thread that
  entered it (setns(2)); the serving threads stay in the root namespace, so they reach moto on
  127.0.0.1. The DNS responder, the fake IMDS and the proxy to moto are made so.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge", "iptables")
"""What the bootstraps may install (bin/imds-access needs iptables): the local repository holds these
and their dependencies."""
JOB_USER, JOB_UID = "ubuntu", 1000
"""The user jobs run as, with one UID on every machine, as the default AMI's `ubuntu`: Slurm refuses
root's jobs (DisableRootJobs=YES), and a job's user is the one instance metadata must not answer."""
REPO = "/srv/fleetform-apt"
SWITCH_ADDR = "10.0.0.2"
PREFIX = 8  # moto gives instances addresses anywhere in 10.0.0.0/8
IMDS_ADDR = "169.254.169.254"
CLONE_NEWNET = 0x40000000
IMAGE_VERSION = "2"  # bump when the image's recipe changes: the cache key


def missing() -> str | None:
    """Why machines cannot be made here, or None."""
    if os.geteuid() != 0:
        return "the multi-host test makes namespaces, overlays and bridges: it runs as root (CI does)"
    gone = [p for p in ("debootstrap", "unshare", "nsenter", "ip", "dpkg-deb", "chroot") if not shutil.which(p)]
    if gone:
        return f"{', '.join(gone)} not installed (apt-get install debootstrap iproute2 util-linux)"
    return None


def run(*command: str, timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout, **kw)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: exit {result.returncode}\n{result.stdout[-3000:]}{result.stderr[-3000:]}")
    return result


def cache_dir() -> Path:
    return Path(os.environ.get("FLEETFORM_MULTIHOST_CACHE") or Path.home() / ".cache/fleetform/multihost")


def _aws_cli_requirement() -> str:
    from importlib.metadata import version

    return f"awscli=={version('awscli')}"


def image() -> Path:
    """The cached image's root (built when absent). Its name carries the recipe's version and the
    AWS CLI's, so a changed recipe builds a new one."""
    key = hashlib.sha256(f"{IMAGE_VERSION} {SUITE} {' '.join(PACKAGES)} {_aws_cli_requirement()}".encode()).hexdigest()
    done = cache_dir() / f"{SUITE}-{key[:12]}"
    if (done / "root" / "etc" / "fleetform-image").exists():
        return done / "root"
    work = done.with_name(done.name + ".building")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    root = work / "root"
    started = time.monotonic()
    run("debootstrap", "--variant=minbase", "--include=python3,ca-certificates", SUITE, str(root), MIRROR,
        timeout=900)
    policy = root / "usr/sbin/policy-rc.d"
    policy.write_text("#!/bin/sh\n# no init in these test machines: packages start no daemon (invoke-rc.d(8))\nexit 101\n")
    policy.chmod(0o755)
    # Slurm's and munge's packages and what they need beyond minbase, downloaded (not installed)
    shutil.copyfile("/etc/resolv.conf", root / "etc/resolv.conf")
    run("chroot", str(root), "apt-get", "clean")  # debootstrap's own debs: the repository holds only what is new
    run("chroot", str(root), "apt-get", "update", "-qq", timeout=600)
    run("chroot", str(root), "apt-get", "install", "-y", "-qq", "--download-only", "--no-install-recommends",
        *PACKAGES, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"}, timeout=900)
    repo = root / REPO.lstrip("/")
    repo.mkdir(parents=True)
    for deb in (root / "var/cache/apt/archives").glob("*.deb"):
        shutil.move(deb, repo / deb.name)
    _packages_index(repo)
    (root / "etc/apt/sources.list").write_text(f"deb [trusted=yes] file:{REPO} ./\n")
    run("chroot", str(root), "apt-get", "clean")
    shutil.rmtree(root / "var/lib/apt/lists", ignore_errors=True)
    (root / "var/lib/apt/lists/partial").mkdir(parents=True)
    # the AWS CLI the image brings (the programs call `aws`)
    run(sys.executable, "-m", "pip", "install", "-q", "--no-compile", "--target", str(root / "opt/aws-cli"),
        _aws_cli_requirement(), timeout=900)
    aws = root / "usr/local/bin/aws"
    aws.write_text("#!/usr/bin/python3\nimport sys\nsys.path.insert(0, '/opt/aws-cli')\n"
                   "from awscli.clidriver import main\nsys.exit(main())\n")
    aws.chmod(0o755)
    run("chroot", str(root), "useradd", "--create-home", "--uid", str(JOB_UID), "--shell", "/bin/bash", JOB_USER)
    (root / "etc/resolv.conf").write_text("")
    (root / "etc/fleetform-image").write_text(f"built in {time.monotonic() - started:.0f} s\n")
    shutil.rmtree(done, ignore_errors=True)
    work.rename(done)
    return done / "root"


def _packages_index(repo: Path) -> None:
    """A flat repository's Packages file (Debian Repository Format, "Flat Repository Format"): each
    .deb's control fields plus Filename, Size and SHA256."""
    stanzas = []
    for deb in sorted(repo.glob("*.deb")):
        control = run("dpkg-deb", "-f", str(deb)).stdout.rstrip("\n")
        data = deb.read_bytes()
        stanzas.append(f"{control}\nFilename: ./{deb.name}\nSize: {len(data)}\nSHA256: {hashlib.sha256(data).hexdigest()}\n")
    (repo / "Packages").write_text("\n".join(stanzas))


_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "setns")


def bound_in(pid: int, make):
    """make() called by a thread that entered the network namespace of `pid`: the sockets it binds
    are that namespace's. The calling thread's namespace is unchanged."""
    result: list = []

    def enter():
        fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
        try:
            _setns(fd)
            result.append(make())
        except BaseException as error:  # noqa: BLE001 - handed to the caller
            result.append(error)
        finally:
            os.close(fd)

    thread = threading.Thread(target=enter)  # it ends here: its namespace dies with it
    thread.start()
    thread.join()
    if isinstance(result[0], BaseException):
        raise result[0]
    return result[0]


PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class Reaper:
    """A process whose namespaces are a machine's or the switch's: PID 1 of its own PID namespace
    (unshare --pid --fork --kill-child), so SIGKILL to it ends everything started inside."""

    def __init__(self, command: list[str], log: Path, start_s: float = 30):
        self.log = open(log, "w")
        # PR_SET_PDEATHSIG: if the test process dies (killed), unshare gets SIGKILL and, through
        # --kill-child, so does the namespace's PID 1 with everything in it
        self.proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True, preexec_fn=_die_with_parent)
        deadline = time.monotonic() + start_s
        self.pid = None
        while self.pid is None:  # the child of unshare is PID 1 inside
            children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
            try:
                found = children.read_text().split()
            except OSError:
                found = []
            if found and Path(log).read_text().strip().endswith("ready"):
                self.pid = int(found[0])
            elif self.proc.poll() is not None or time.monotonic() > deadline:
                # no caller holds this object to stop it: what was started dies here (unshare's
                # --kill-child takes its namespace's PID 1 and all inside with it)
                self.proc.kill()
                self.proc.wait()
                self.log.close()
                raise RuntimeError(f"{' '.join(command)} did not start: {Path(log).read_text()[-2000:]}")
            else:
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)  # PID 1 of the namespace: all inside die
            with contextlib.suppress(OSError):
                self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)
        self.log.close()


REAP = ("import os, sys, time\nprint('ready', flush=True)\nwhile True:\n    try:\n        os.wait()\n"
        "    except ChildProcessError:\n        time.sleep(0.5)\n")


class Switch(Reaper):
    """A network namespace with bridge br0 at 10.0.0.2/8 and 169.254.169.254/32."""

    def __init__(self, tmp: Path):
        super().__init__(["unshare", "--net", "--pid", "--fork", "--kill-child=SIGKILL", sys.executable, "-c", REAP],
                         tmp / "switch.log")
        try:  # the caller gets no switch to stop when this fails: stopped here
            self.ip("link", "set", "lo", "up")
            self.ip("link", "add", "br0", "type", "bridge")
            self.ip("addr", "add", f"{SWITCH_ADDR}/{PREFIX}", "dev", "br0")
            self.ip("addr", "add", f"{IMDS_ADDR}/32", "dev", "br0")
            self.ip("link", "set", "br0", "up")
        except BaseException:
            self.stop()
            raise
        self.ports = 0

    def ip(self, *args: str) -> None:
        run("nsenter", "-t", str(self.pid), "-n", "ip", *args, timeout=30)

    def plug(self, machine: Machine, address: str) -> None:
        """A veth pair: one end on the bridge, the other the machine's eth0 with its address; the
        default route (the metadata address among it) through the switch."""
        self.ports += 1
        port = f"veth{self.ports}"
        self.ip("link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", str(machine.pid))
        self.ip("link", "set", port, "master", "br0", "up")
        for args in (("link", "set", "lo", "up"), ("addr", "add", f"{address}/{PREFIX}", "dev", "eth0"),
                     ("link", "set", "eth0", "up"), ("route", "add", "default", "via", SWITCH_ADDR)):
            run("nsenter", "-t", str(machine.pid), "-n", "ip", *args, timeout=30)


DEVICES = {"null": (1, 3), "zero": (1, 5), "random": (1, 8), "urandom": (1, 9), "full": (1, 7), "tty": (5, 0)}


class Machine(Reaper):
    """One host: an overlay of the image (its changes in tmp/<name>/upper), its own /proc, /sys (with the host's cgroup tree as it is, v1, hybrid or v2:
    slurmd's cgroup plugin reads it; proctrack/linuxproc and task/none change nothing there), /dev
    (with /dev/nvidia0..7 as stand-ins of the GPUs gres.conf names), /run and /tmp, in its own
    mount, UTS, network and PID namespaces; PID 1 is the reaper, chrooted into the overlay."""

    def __init__(self, tmp: Path, name: str, image_root: Path, files: dict[str, str | Path],
                 binds: dict[str, Path] | None = None):
        self.name = name
        base = tmp / name
        self.upper, work, self.merged = base / "upper", base / "work", base / "merged"
        for d in (self.upper, work, self.merged):
            d.mkdir(parents=True, exist_ok=True)
        for target, content in files.items():  # what the machine has before it boots
            dest = self.upper / target.lstrip("/")
            dest.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, Path):
                shutil.copytree(content, dest, symlinks=True)
            else:
                dest.write_text(content)
        devs = "; ".join(f"mknod -m 666 {self.merged}/dev/{d} c {a} {b}" for d, (a, b) in DEVICES.items())
        gpus = "; ".join(f"mknod -m 666 {self.merged}/dev/nvidia{i} c 1 3" for i in range(8))
        # a folder of the test's, the same on every machine that gets it: a shared file system's stand-in
        shared = "".join(f"mkdir -p {self.merged}{target}; mount --bind {source} {self.merged}{target}; "
                         for target, source in (binds or {}).items())
        script = (
            "set -e; mount --make-rprivate /; "
            f"mount -t overlay overlay -o lowerdir={image_root},upperdir={self.upper},workdir={work} {self.merged}; "
            f"{shared}mount -t proc proc {self.merged}/proc; mount -t sysfs -o ro sysfs {self.merged}/sys; "
            f"mount --rbind /sys/fs/cgroup {self.merged}/sys/fs/cgroup; mount -t tmpfs -o mode=755 dev {self.merged}/dev; {devs}; {gpus}; "
            f"mkdir -p {self.merged}/dev/pts {self.merged}/dev/shm; mount -t tmpfs -o mode=1777 shm {self.merged}/dev/shm; "
            f"mount -t tmpfs -o mode=755 run {self.merged}/run; mount -t tmpfs -o mode=1777 tmp {self.merged}/tmp; "
            f"hostname localhost; exec chroot {self.merged} /usr/bin/python3 -c \"$0\"")
        super().__init__(["unshare", "--net", "--uts", "--mount", "--pid", "--fork", "--kill-child=SIGKILL",
                          "sh", "-c", script, REAP], base / "init.log")

    def command(self, *args: str, env: dict[str, str] | None = None) -> list[str]:
        """argv that runs `args` inside this machine (all its namespaces, its root), with a clean
        environment: what a login on the machine would have."""
        base = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root",
                "LANG": "C.UTF-8"}
        return ["nsenter", "-t", str(self.pid), "-n", "-u", "-m", "-p", "-r", "-w", "env", "-i",
                *(f"{k}={v}" for k, v in {**base, **(env or {})}.items()), *args]

    def run(self, *args: str, timeout: float = 120, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(*args, env=env), capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)

    def file(self, absolute: str) -> Path:
        """A file of the machine as its mount namespace shows it (through its PID 1's root)."""
        return Path(f"/proc/{self.pid}/root{absolute}")


# --- the switch's services ------------------------------------------------------------------------

def serve_tcp_proxy(switch: Switch, address: tuple[str, int], target: tuple[str, int], stop: threading.Event) -> None:
    """Connections to `address` in the switch go to `target` (127.0.0.1 in the root namespace)."""
    listener = bound_in(switch.pid, lambda: _listen(address))

    def pipe(a: socket.socket, b: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := a.recv(65536):
                b.sendall(data)
        with contextlib.suppress(OSError):
            b.shutdown(socket.SHUT_WR)

    def accept() -> None:
        listener.settimeout(0.5)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                break
            conn.settimeout(None)
            upstream = socket.create_connection(target, timeout=10)
            upstream.settimeout(None)
            for a, b in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=pipe, args=(a, b), daemon=True).start()
        listener.close()

    threading.Thread(target=accept, daemon=True).start()


def _listen(address: tuple[str, int]) -> socket.socket:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(address)
    s.listen(64)
    return s


def _dns_name(packet: bytes, offset: int) -> tuple[str, int]:
    labels = []
    while True:
        length = packet[offset]
        if length == 0:
            return ".".join(labels), offset + 1
        if length & 0xC0:
            raise ValueError("compressed name in a question")
        labels.append(packet[offset + 1:offset + 1 + length].decode("ascii"))
        offset += 1 + length


def dns_answer(query: bytes, lookup) -> bytes:
    """The answer to one DNS query (RFC 1035 4.1): A records from lookup(name) -> [address], or
    NXDOMAIN when it knows no such name; an existing name asked for another type gets no records."""
    ident, flags = struct.unpack(">HH", query[:4])
    name, end = _dns_name(query, 12)
    qtype, _qclass = struct.unpack(">HH", query[end:end + 4])
    question = query[12:end + 4]
    addresses = lookup(name.lower().rstrip("."))
    rcode = 3 if addresses is None else 0
    answers = b""
    if addresses and qtype == 1:
        for address in addresses:
            answers += b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) + socket.inet_aton(address)
    count = len(addresses) if addresses and qtype == 1 else 0
    header = struct.pack(">HHHHHH", ident, 0x8000 | (flags & 0x0100) | 0x0400 | rcode, 1, count, 0, 0)
    return header + question + answers


def serve_dns(switch: Switch, lookup, stop: threading.Event) -> None:
    """The VPC resolver's stand-in at 10.0.0.2:53 (UDP): answers from `lookup`, forwards nothing."""
    sock = bound_in(switch.pid, lambda: _udp((SWITCH_ADDR, 53)))

    def loop() -> None:
        sock.settimeout(0.5)
        while not stop.is_set():
            try:
                query, client = sock.recvfrom(4096)
            except TimeoutError:
                continue
            except OSError:
                break
            try:
                sock.sendto(dns_answer(query, lookup), client)
            except (ValueError, IndexError, struct.error):
                continue
        sock.close()

    threading.Thread(target=loop, daemon=True).start()


def _udp(address: tuple[str, int]) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(address)
    return s


def serve_http(switch: Switch, address: tuple[str, int], handler, stop: threading.Event):
    from http.server import ThreadingHTTPServer

    server = bound_in(switch.pid, lambda: ThreadingHTTPServer(address, handler))
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.5}, daemon=True).start()
    threading.Thread(target=lambda: (stop.wait(), server.shutdown(), server.server_close()), daemon=True).start()
    return server
