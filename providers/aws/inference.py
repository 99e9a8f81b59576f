"""An inference fleet on EKS: the cluster and its GPU node group."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from fleetform.model import Blueprint, Fleet

from .common import ROOT_GIB, TAINT_EFFECTS, _opts, _user_data
from .iam import Iam
from .network import Network, Security

LOCAL_NVME_NODECONFIG = """MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="FLEETFORM"

--FLEETFORM
Content-Type: application/node.eks.aws

# nodeadm: the instance-store NVMe drives as one RAID0 volume under kubelet and containerd, so
# the model caches (emptyDir, ephemeral-storage) of the vLLM pods land on local NVMe.
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  instance:
    localStorage:
      strategy: RAID0

--FLEETFORM--
"""


class InferenceFleet(pulumi.ComponentResource):
    """An EKS cluster (API authentication mode) and a managed GPU node group with the NVIDIA AMI, the
    nvidia.com/gpu taint and the labels the rendered manifests select on."""

    def __init__(self, name: str, bp: Blueprint, fleet: Fleet, net: Network, security: Security, iam: Iam,
                 tags: dict, opts: pulumi.ResourceOptions | None = None):
        super().__init__("fleetform:aws:InferenceFleet", name, None, opts)
        kube = fleet.kube
        tags = {**tags, "fleetform:fleet": fleet.name}
        cluster = aws.eks.Cluster(
            f"{name}-cluster", name=f"{bp.name}-{fleet.name}", version=kube.version, role_arn=iam.eks_cluster_role.arn,
            access_config={"authentication_mode": "API", "bootstrap_cluster_creator_admin_permissions": True},
            vpc_config={"subnet_ids": net.subnet_ids, "security_group_ids": [security.group_id],
                        "endpoint_private_access": True, "endpoint_public_access": False},
            tags=tags, opts=_opts(self))
        template = aws.ec2.LaunchTemplate(
            f"{name}-nodes", metadata_options={"http_tokens": "required", "http_endpoint": "enabled",
                                               "http_put_response_hop_limit": 2},
            user_data=_user_data(LOCAL_NVME_NODECONFIG) if fleet.instance.local_nvme_gb else None,
            block_device_mappings=[{"device_name": "/dev/xvda", "ebs": {
                "volume_size": ROOT_GIB, "volume_type": "gp3", "encrypted": "true", "delete_on_termination": "true"}}],
            tag_specifications=[{"resource_type": "instance", "tags": tags}], tags=tags, opts=_opts(self))
        aws.eks.NodeGroup(
            f"{name}-gpu", cluster_name=cluster.name, node_role_arn=iam.eks_node_role.arn, subnet_ids=[net.subnet_id],
            ami_type="AL2023_x86_64_NVIDIA", instance_types=[fleet.instance.name],
            capacity_type="SPOT" if fleet.capacity_type == "spot" else "ON_DEMAND",
            scaling_config={"min_size": fleet.nodes.min, "max_size": fleet.nodes.max, "desired_size": fleet.nodes.min},
            labels=dict(kube.node_labels),
            taints=[{"key": key, "value": value, "effect": TAINT_EFFECTS[effect]} for key, value, effect in kube.node_taints],
            launch_template={"id": template.id, "version": template.latest_version.apply(str)},
            tags=tags, opts=_opts(self))
        self.cluster = cluster
        self.register_outputs({"cluster": cluster.name})
