"""Generated blueprint variants for render and slurmctld tests: each exercises one shape of fleet."""

from __future__ import annotations

AWS = """apiVersion: fleetform/v1
kind: Blueprint
metadata: {{name: {name}, version: 1.0.0}}
provider: {{cloud: aws, region: us-east-1, availability_zone: us-east-1a, network: {{cidr: 10.0.0.0/16}}}}
storage:
  - {{name: scratch, type: fsx-lustre, capacity_gib: 2400, throughput_mb_per_tib: 250, mount_path: /fsx}}
  - {{name: checkpoints, type: s3}}
fleets:
  - name: train
    role: training
    instance_type: {instance}
{image}    nodes: {nodes}
    storage: [scratch, checkpoints]
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


def aws(name: str, nodes: str = "4", instance: str = "p5.48xlarge", scheduler: str = "", image: str = "") -> str:
    return AWS.format(name=name, nodes=nodes, instance=instance, scheduler=scheduler,
                      image=f"    image: {image}\n" if image else "")


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
    # Slurm 24.05 is not what the default image runs: the blueprint names its own image
    "p4d-slurm-2405": aws("ampere", nodes="3", instance="p4d.24xlarge", scheduler='      slurm_version: "24.05"',
                          image="/acme/images/slurm-24.05/ami-id"),
    "10000-nodes": aws("huge", nodes="10000", scheduler="      topology: {nodes_per_switch: 32}"),
    "onprem-roce-switches": onprem(
        "roce", "gpu[01-08]", "{fabric: roce, hcas: [mlx5_0, mlx5_1], socket_ifname: eth0, gid_index: 3, traffic_class: 106}",
        """      topology:
        switches:
          - {name: sw1, nodes: "gpu[01-04]"}
          - {name: sw2, nodes: "gpu[05-08]"}"""),
    "onprem-tcp": onprem("tcp", "node[1-3]", "{fabric: tcp, socket_ifname: eno1}"),
}


INFERENCE = """apiVersion: fleetform/v1
kind: Blueprint
metadata: {{name: {name}, version: 1.0.0, labels: {{team: serving}}}}
provider: {{cloud: aws, region: us-east-1, availability_zone: us-east-1a, network: {{cidr: 10.0.0.0/16}}}}
fleets:
  - name: serve
    role: inference
    instance_type: {instance}
    nodes: {{min: 1, max: {nodes}}}
    scheduler: {{type: kubernetes, version: "{version}", namespace: serve, autoscaler: {autoscaler}}}
{sharing}    models:
{models}"""

MODEL = """      - name: {name}
        image: vllm/vllm-openai:v0.11.0
        model: org/{name}
        model_params_billion: {params}
        precision: bf16
        tensor_parallel: {tp}
        max_model_len: 4096
        replicas: {replicas}
{autoscale}"""


def inference(name: str, *, instance: str = "p5.48xlarge", nodes: int = 4, version: str = "1.33",
              autoscaler: str = "keda", sharing: str = "", models: int = 1, params: int = 8, tp: int = 1) -> str:
    autoscaled = autoscaler != "none"
    body = "".join(MODEL.format(
        name=f"model-{i}", params=params, tp=tp,
        replicas="{min: 1, max: 2}" if autoscaled else "2",
        autoscale="        autoscale: {metric: queue_depth, target_per_replica: 3}\n" if autoscaled else "")
        for i in range(models))
    return INFERENCE.format(name=name, instance=instance, nodes=nodes, version=version, autoscaler=autoscaler,
                            sharing=f"    gpu_sharing: {sharing}\n" if sharing else "", models=body)


def on_premises(text: str, hardware: str, hosts: str) -> str:
    """An inference variant on premises: Kubernetes versions EKS no longer offers (1.25) or that its release
    calendar does not list yet (1.37) are refused on AWS (eks-version), yet fleetform renders for them."""
    aws = "provider: {cloud: aws, region: us-east-1, availability_zone: us-east-1a, network: {cidr: 10.0.0.0/16}}"
    lines = text.replace(aws, "provider: {cloud: onprem}").splitlines(keepends=True)
    out = []
    for line in lines:
        if line.startswith("    instance_type: "):
            line = f"    hardware: {hardware}\n    hosts: {hosts}\n"
        elif line.startswith("    nodes: "):
            continue  # the hosts are the nodes: on-prem fleets are fixed
        out.append(line)
    return "".join(out)


INFERENCE_VARIANTS: dict[str, str] = {
    "hpa-three-models": inference("hpa", autoscaler="hpa", models=3),
    "fixed-replicas": inference("fixed", autoscaler="none", models=2),
    "tp8-k8s-125": on_premises(inference("big", params=70, tp=8, nodes=2, version="1.25"),
                               "{gpu: H100-80GB, gpu_count: 8, sockets: 2, cores_per_socket: 56, threads_per_core: 2, "
                               "memory_gib: 2048}", "gpu-[01-02]"),
    "time-slicing-k8s-137": on_premises(inference("ts", instance="g6e.12xlarge",
                                                  sharing="{strategy: time-slicing, replicas: 2}", version="1.37",
                                                  models=2),
                                        "{gpu: L40S, gpu_count: 4, sockets: 1, cores_per_socket: 24, "
                                        "threads_per_core: 2, memory_gib: 384}", "ts-[01-04]"),
    "mps": inference("mps", instance="g6.12xlarge", sharing="{strategy: mps, replicas: 2}", autoscaler="hpa", params=3),
    "mig-single": inference("migs", instance="p5.48xlarge", sharing="{strategy: mig, profile: 1g.20gb}", models=4),
    "mig-mixed": inference("migm", instance="p4de.24xlarge",
                           sharing="{strategy: mig, profile: 2g.20gb, mig_strategy: mixed}", models=2),
}
