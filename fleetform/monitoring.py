"""Monitoring of a Slurm training fleet (issue 20; docs/monitoring.md): every compute node runs
Prometheus' node exporter and NVIDIA's dcgm-exporter, the controller runs Prometheus and scrapes them
(on AWS; on-prem the site runs them, and fleetform renders the scrape configuration and its targets).
Kubernetes fleets get the same exporters from the GPU Operator and kube-prometheus-stack instead.

What runs where, and why:

- node exporter: Ubuntu's `prometheus-node-exporter` package on every compute node and on the controller
  (fleetform's default image is AWS's DLAMI Base OSS Nvidia Ubuntu 24.04: providers/aws/training.py), so
  the image's own archive pins its version and its security updates. Port 9100: the port the Prometheus
  project registers for it (prometheus/prometheus wiki "Default port allocations") and its
  `--web.listen-address` default (prometheus/node_exporter node_exporter.go).
- dcgm-exporter: NVIDIA's container image, pinned to the tag the GPU Operator release fleetform
  installs on EKS pins (tests/data/charts/gpu-operator-v26.7.0-dcgm-values.yaml, dcgmExporter.version),
  so Slurm and Kubernetes fleets export the same metrics. The container is how NVIDIA's dcgm-exporter
  README starts it (`docker run -d --gpus all --cap-add SYS_ADMIN --rm -p 9400:9400
  nvcr.io/nvidia/k8s/dcgm-exporter:<tag>`); NVIDIA publishes no binary of it and the DCGM package does
  not include it (building it needs Go and DCGM's headers), while the DLAMI brings Docker and the NVIDIA
  container toolkit. Port 9400: its `--address` default (NVIDIA/dcgm-exporter, pkg/cmd/app.go, ":9400").
- Prometheus: Ubuntu's `prometheus` package on the controller, the one machine that lives as long as
  the cluster; its data on the controller's root volume, bounded by time and by size.

Elastic nodes come and go: a program on the controller (bin/monitoring-targets, every minute) writes
Prometheus' file_sd file from Slurm's own node list (`sinfo -h -N -o "%N %t"`), leaving out the nodes
Slurm has powered off or is powering up or down (state suffixes `~`, `#`, `%`: sinfo(1), NODE STATE
CODES), whose instances do not exist or are not yet booted; each target is the node's name in the
fleet's Route 53 zone (fleetform_dns.py), which resume writes before the node boots. Slurm is the one
that knows which nodes should be up: a node that is up for Slurm and does not answer is an alert, a node
that Slurm powered down is not.
"""

from __future__ import annotations

import hostlist

from .records import frozen

NODE_EXPORTER_PORT = 9100
DCGM_EXPORTER_PORT = 9400
PROMETHEUS_PORT = 9090  # prometheus/prometheus cmd/prometheus/main.go, --web.listen-address default "0.0.0.0:9090"
DCGM_EXPORTER_IMAGE = "nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-distroless"
"""The tag of the GPU Operator v26.7.0 chart's dcgmExporter (repository nvcr.io/nvidia/k8s, image
dcgm-exporter, version 4.6.0-4.8.3-distroless): DCGM 4.6.0, exporter 4.8.3."""
NODE_EXPORTER_PACKAGE = "prometheus-node-exporter"
PROMETHEUS_PACKAGE = "prometheus"
SCRAPE_INTERVAL_S = 30
"""dcgm-exporter samples every 30 s by default (its --collect-interval, 30000 ms): scraping more often
reads the same values again."""
RETENTION_DAYS = 15  # Prometheus' own default --storage.tsdb.retention.time
RETENTION_SIZE_GB = 40
"""--storage.tsdb.retention.size: at most 40 GB of the controller's 100 GiB root volume
(providers/aws/training.py CONTROLLER_ROOT_GIB; tests/test_monitoring.py keeps it under half of it),
whichever of time and size comes first removes the oldest blocks."""
TARGETS_FILE = "/var/lib/fleetform/monitoring/nodes.json"
"""The file_sd file bin/monitoring-targets writes and prometheus.yml reads (prometheus' user reads it)."""
CONFIG_FILE = "/etc/prometheus/prometheus.yml"  # where Ubuntu's prometheus package reads its configuration


@frozen
class MonitoringConfig:
    fleet: str
    cluster_label: str  # the `cluster` label of every series: the fleet's name
    controller_host: str
    node_exporter_port: int
    dcgm_exporter_port: int
    prometheus_port: int
    dcgm_exporter_image: str
    node_exporter_package: str
    prometheus_package: str
    scrape_interval_s: int
    retention_days: int
    retention_size_gb: int
    targets_file: str
    config_file: str
    nodes: tuple[str, ...] = ()  # on-prem: every compute node, named in the file_sd file fleetform renders

    @property
    def onprem(self) -> bool:
        return bool(self.nodes)

    @property
    def local_targets(self) -> tuple[str, str]:
        """(Prometheus itself, the controller's node exporter): on AWS Prometheus runs on the controller and
        scrapes it as localhost; on-prem it runs where the site runs it and scrapes the controller by name."""
        controller = f"{self.controller_host}:{self.node_exporter_port}" if self.onprem \
            else f"localhost:{self.node_exporter_port}"
        return f"localhost:{self.prometheus_port}", controller

    @property
    def jobs(self) -> tuple[tuple[str, str], ...]:
        """(job, replacement of __address__) of each exporter on the compute nodes: the node's name from
        the file_sd file, with the exporter's port."""
        return ("node", f"${{1}}:{self.node_exporter_port}"), ("dcgm", f"${{1}}:{self.dcgm_exporter_port}")

    @property
    def prometheus_args(self) -> str:
        """ARGS of /etc/default/prometheus (Ubuntu's unit: `ExecStart=/usr/bin/prometheus $ARGS`)."""
        return (f"--config.file={self.config_file} --storage.tsdb.retention.time={self.retention_days}d "
                f"--storage.tsdb.retention.size={self.retention_size_gb}GB "
                f"--web.listen-address=0.0.0.0:{self.prometheus_port}")


def build(fleet) -> MonitoringConfig | None:
    """Every training fleet that Slurm schedules. On AWS the bootstrap installs the exporters and Prometheus
    (above); on-prem the site installs them (the same ports, docs/monitoring.md), and fleetform renders the
    scrape configuration with a file_sd file naming every node of the fleet, which is fixed there."""
    slurm = fleet.slurm
    if slurm is None:
        return None
    nodes = () if slurm.ec2 is not None else tuple(hostlist.expand_hostlist(slurm.all_nodes))
    return MonitoringConfig(nodes=nodes,
        fleet=fleet.name, cluster_label=fleet.name, controller_host=slurm.controller_host,
        node_exporter_port=NODE_EXPORTER_PORT, dcgm_exporter_port=DCGM_EXPORTER_PORT, prometheus_port=PROMETHEUS_PORT,
        dcgm_exporter_image=DCGM_EXPORTER_IMAGE, node_exporter_package=NODE_EXPORTER_PACKAGE,
        prometheus_package=PROMETHEUS_PACKAGE, scrape_interval_s=SCRAPE_INTERVAL_S, retention_days=RETENTION_DAYS,
        retention_size_gb=RETENTION_SIZE_GB, targets_file=TARGETS_FILE, config_file=CONFIG_FILE)
