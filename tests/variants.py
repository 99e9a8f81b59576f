"""Generated blueprint variants for render and slurmctld tests: each exercises one shape of fleet."""

from __future__ import annotations

AWS = """apiVersion: fleetform/v1
kind: Blueprint
metadata: {{name: {name}, version: 1.0.0}}
provider: {{cloud: aws, region: us-east-1, availability_zone: us-east-1a, network: {{cidr: 10.0.0.0/16}}}}
storage:
  - {{name: scratch, type: fsx-lustre, capacity_gib: 2400, throughput_mb_per_tib: 250, mount_path: /fsx}}
fleets:
  - name: train
    role: training
    instance_type: {instance}
    nodes: {nodes}
    storage: [scratch]
    scheduler:
      type: slurm
{scheduler}
    checkpoint: {{every_minutes: 30, path: /fsx/checkpoints}}
"""

ONPREM = """apiVersion: fleetform/v1
kind: Blueprint
metadata: {{name: {name}, version: 1.0.0}}
provider: {{cloud: onprem, site: lab}}
fleets:
  - name: train
    role: training
    hosts: {hosts}
    hardware: {{gpu: A100-80GB, gpu_count: 4, sockets: 2, cores_per_socket: 32, threads_per_core: 1, memory_gib: 512}}
    interconnect: {interconnect}
    scheduler:
      type: slurm
      controller: {{host: head}}
{scheduler}
"""


def aws(name: str, nodes: str = "4", instance: str = "p5.48xlarge", scheduler: str = "") -> str:
    return AWS.format(name=name, nodes=nodes, instance=instance, scheduler=scheduler)


def onprem(name: str, hosts: str, interconnect: str, scheduler: str = "") -> str:
    return ONPREM.format(name=name, hosts=hosts, interconnect=interconnect, scheduler=scheduler)


VARIANTS: dict[str, str] = {
    "elastic": aws("elastic", nodes="{min: 2, max: 16}", scheduler="      topology: {nodes_per_switch: 4}"),
    "scale-to-zero": aws("zero", nodes="{min: 0, max: 4}"),
    "partitions": aws("parts", nodes="8", scheduler="""      partitions:
        - {name: batch, default: true, max_time: 7-00:00:00}
        - {name: debug, nodes: "train-[001-002]", max_time: 60, priority_tier: 10}
        - {name: long, max_time: UNLIMITED}"""),
    "one-node": aws("single", nodes="1", instance="p5.4xlarge"),
    "g6e": aws("lovelace", nodes="2", instance="g6e.48xlarge"),
    "p4d-slurm-2405": aws("ampere", nodes="3", instance="p4d.24xlarge", scheduler='      slurm_version: "24.05"'),
    "10000-nodes": aws("huge", nodes="10000", scheduler="      topology: {nodes_per_switch: 32}"),
    "onprem-roce-switches": onprem(
        "roce", "gpu[01-08]", "{fabric: roce, hcas: [mlx5_0, mlx5_1], socket_ifname: eth0, gid_index: 3, traffic_class: 106}",
        """      topology:
        switches:
          - {name: sw1, nodes: "gpu[01-04]"}
          - {name: sw2, nodes: "gpu[05-08]"}"""),
    "onprem-tcp": onprem("tcp", "node[1-3]", "{fabric: tcp, socket_ifname: eno1}"),
}
