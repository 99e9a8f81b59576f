"""Monitoring of a Slurm training fleet on AWS (fleetform/monitoring.py, docs/monitoring.md): what the
bootstrap installs (node exporter on every machine, dcgm-exporter on compute nodes, Prometheus on the
controller) and the file_sd file of the compute nodes Prometheus scrapes. Its values are in
bin/monitoring.json; Prometheus' configuration is the rendered <fleet>/slurm/monitoring/prometheus.yml.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from fleetform_node import BIN, Failure, log, path, run

CONFIG = json.loads((BIN / "monitoring.json").read_text())
APT = {"DEBIAN_FRONTEND": "noninteractive"}
DCGM_UNIT = "fleetform-dcgm-exporter.service"
TARGETS_UNIT = "fleetform-monitoring-targets"
# sinfo(1), NODE STATE CODES: "~" powered off, "#" being powered up or configured, "%" being powered
# down. Such a node has no booted instance: Prometheus is not asked to scrape it.
NOT_UP = ("~", "#", "%")


def nodes_up(sinfo_output: str) -> list[str]:
    """The node names in `sinfo -h -N -o "%N %t"` output whose state says their machine runs. sinfo -N
    lists a node once per partition it is in: each name once. A node that does not respond (suffix
    `*`) stays: Prometheus then reports it down, which is what a person should see."""
    names = set()
    for line in sinfo_output.splitlines():
        words = line.split()
        if len(words) != 2:
            continue
        name, state = words
        if not state.endswith(NOT_UP):
            names.add(name)
    return sorted(names)


def file_sd(names: list[str], zone: str, cluster: str) -> list[dict]:
    """Prometheus' file_sd format (prometheus docs, file_sd_config: a list of {targets, labels}): one
    group per node, its address the node's name in the fleet's zone (resume writes that record before
    the node boots: fleetform_dns.py), its `node` label the Slurm name. Without a zone, the short name
    (every machine's resolver searches the zone)."""
    return [{"targets": [f"{name}.{zone}" if zone else name], "labels": {"node": name, "cluster": cluster}}
            for name in names]


def write_targets(groups: list[dict]) -> bool:
    """Writes the file_sd file atomically (Prometheus reads a half-written file as an error and keeps
    the previous targets, but a rename is never half-written); True when it changed."""
    target = path(CONFIG["targets_file"])
    text = json.dumps(groups, indent=1, sort_keys=True) + "\n"
    if target.exists() and target.read_text() == text:
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(target.parent, 0o755)
    temporary = target.with_name(target.name + ".tmp")
    temporary.write_text(text)
    os.chmod(temporary, 0o644)
    os.replace(temporary, target)
    return True


def update_targets(env: dict[str, str]) -> list[str]:
    """The controller's timer: sinfo, then the file_sd file. sinfo failing (slurmctld restarting)
    leaves the file as it is."""
    listed = run("sinfo", "-h", "-N", "-o", "%N %t").stdout
    names = nodes_up(listed)
    if write_targets(file_sd(names, env.get("FLEETFORM_DNS_ZONE", "").rstrip("."), CONFIG["cluster_label"])):
        log(f"monitoring targets: {' '.join(names) or 'none'}")
    return names


def _install(packages: list[str]) -> None:
    if packages:
        run("apt-get", "update", extra=APT)
        run("apt-get", "install", "-y", "--no-install-recommends", *packages, extra=APT)
        log(f"installed {' '.join(packages)}")


def _units() -> Path:
    return path("/etc/systemd/system")


def dcgm_unit() -> str:
    """NVIDIA's dcgm-exporter README starts it as `docker run -d --gpus all --cap-add SYS_ADMIN --rm -p
    9400:9400 <image>`; here under systemd, in the foreground, restarted when it dies."""
    image, port = CONFIG["dcgm_exporter_image"], CONFIG["dcgm_exporter_port"]
    return ("[Unit]\nDescription=fleetform: NVIDIA dcgm-exporter (Prometheus GPU metrics)\n"
            "After=docker.service\nRequires=docker.service\n\n[Service]\n"
            "ExecStartPre=-/usr/bin/docker rm -f fleetform-dcgm-exporter\n"
            f"ExecStart=/usr/bin/docker run --rm --name fleetform-dcgm-exporter --gpus all --cap-add SYS_ADMIN "
            f"-p {port}:{port} {image}\n"
            "ExecStop=/usr/bin/docker stop fleetform-dcgm-exporter\nRestart=always\nRestartSec=10\n\n"
            "[Install]\nWantedBy=multi-user.target\n")


def targets_units() -> dict[str, str]:
    return {
        f"{TARGETS_UNIT}.service": "[Unit]\nDescription=fleetform: Prometheus targets from Slurm's node list\n"
        "After=slurmctld.service\n\n[Service]\nType=oneshot\n"
        f"ExecStart={sys.executable} {BIN / 'monitoring-targets'}\n",
        f"{TARGETS_UNIT}.timer": "[Unit]\nDescription=fleetform monitoring targets, every minute\n\n[Timer]\n"
        "OnBootSec=1min\nOnUnitActiveSec=1min\n\n[Install]\nWantedBy=timers.target\n"}


def setup(role: str, systemd: bool) -> None:
    """Installs and starts what the role runs. Without systemd (tests, containers) the files are
    written and nothing is started."""
    packages = [CONFIG["node_exporter_package"]] if shutil.which("prometheus-node-exporter") is None else []
    if role == "controller":
        if shutil.which("prometheus") is None:
            packages.append(CONFIG["prometheus_package"])
    if not systemd:  # FLEETFORM_ROOT (one test host) or no systemd: nothing would start them
        log(f"no systemd (or FLEETFORM_ROOT set): not installing {' '.join(packages) or 'anything'}")
    else:
        _install(packages)
    if role == "controller":
        config = path(CONFIG["config_file"])
        config.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(BIN.parent / "monitoring" / "prometheus.yml", config)
        # Ubuntu's and Debian's prometheus unit: EnvironmentFile=/etc/default/prometheus, ExecStart=... $ARGS
        defaults = path("/etc/default/prometheus")
        defaults.parent.mkdir(parents=True, exist_ok=True)
        defaults.write_text(f'ARGS="{CONFIG["prometheus_args"]}"\n')
        for name, text in targets_units().items():
            (_units() / name).parent.mkdir(parents=True, exist_ok=True)
            (_units() / name).write_text(text)
    elif role == "compute":
        _units().mkdir(parents=True, exist_ok=True)
        (_units() / DCGM_UNIT).write_text(dcgm_unit())
    else:
        raise Failure(f"monitoring: no role {role!r}")
    if not systemd:
        log("no systemd (or FLEETFORM_ROOT set): monitoring files written, nothing started")
        return
    run("systemctl", "daemon-reload")
    run("systemctl", "enable", "--now", "prometheus-node-exporter")
    if role == "controller":
        run("systemctl", "enable", "prometheus")
        run("systemctl", "restart", "prometheus")
        run("systemctl", "enable", "--now", f"{TARGETS_UNIT}.timer")
    else:
        run("systemctl", "enable", "--now", DCGM_UNIT)
