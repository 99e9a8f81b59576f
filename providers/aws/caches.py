"""An inference fleet's shared cache on AWS (`cache:` without storage_class, fleetform/k8s.py SharedCache): an EFS
file system, its mount target in the nodes' subnet behind a security group that admits NFS from the EKS nodes only,
and the StorageClass its claim names, whose dynamic provisioning makes one EFS access point per claim.

The StorageClass is made here, not rendered: its fileSystemId is the file system's id, which only `pulumi up` knows
(the EFS CSI driver takes it as a StorageClass parameter; kubernetes-sigs/aws-efs-csi-driver v3.4.1 docs/parameters.md).
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from fleetform.k8s import SharedCache

from .common import _opts

NFS_PORT = 2049
"""EFS is NFSv4.1 on TCP 2049 only: a mount target's security groups must admit it from the clients (EFS User Guide,
"Using VPC security groups": "inbound rules ... must allow access on the NFS port (2049)")."""
THROUGHPUT_MODE = "elastic"
"""EFS elastic throughput scales reads and writes with the load and bills per GB moved (EFS User Guide, "Throughput
modes": elastic is "recommended for ... spiky or unpredictable" workloads): replicas read a model's weights in bursts
when they start, and sit idle otherwise."""
DIRECTORY_PERMS = "700"
"""The access point's root directory belongs to the pods' uid and gid (RUN_AS) with mode 700: every replica of the
fleet runs as that uid, and EFS enforces the access point's identity on every operation (docs/parameters.md: "Using
dynamic provisioning, user identity enforcement is always applied"), so a restricted pod (non-root, no capability)
writes the cache without a chown and no other identity reads it."""
BASE_PATH = "/fleetform"


def storage_class(cache: SharedCache, file_system_id) -> dict:
    """The StorageClass object of a fleet's shared cache (storage.k8s.io/v1; parameters as the EFS CSI driver documents
    them: provisioningMode efs-ap, fileSystemId, directoryPerms, uid, gid, basePath)."""
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": cache.storage_class, "labels": {"app.kubernetes.io/managed-by": "fleetform"}},
            "provisioner": "efs.csi.aws.com",
            "parameters": {"provisioningMode": "efs-ap", "fileSystemId": file_system_id,
                           "directoryPerms": DIRECTORY_PERMS, "uid": str(cache.uid), "gid": str(cache.uid),
                           "basePath": BASE_PATH},
            "reclaimPolicy": "Delete", "volumeBindingMode": "Immediate"}


class CacheFileSystem(pulumi.ComponentResource):
    """One fleet's EFS file system for its shared cache, encrypted at rest, and in transit: the claim's volume is an
    access point, and the EFS CSI driver mounts an access point with `tls` always (pkg/driver/node.go at v3.4.1:
    "Access point mounts won't work without it"); it sets no local_lock or nolock option, so huggingface_hub's flock
    locks reach the server (fleetform/k8s.py SHARED_ENV)."""

    TYPE = "fleetform:aws:CacheFileSystem"

    def __init__(self, name: str, cache: SharedCache, net, eks, tags: dict, opts: pulumi.ResourceOptions | None = None):
        super().__init__(self.TYPE, name, None, opts)
        self.file_system = aws.efs.FileSystem(
            f"{name}-fs", encrypted=True, performance_mode="generalPurpose", throughput_mode=THROUGHPUT_MODE,
            tags={**tags, "Name": f"{name}"}, opts=_opts(self))
        self.security_group = aws.ec2.SecurityGroup(
            f"{name}-nfs", vpc_id=net.vpc_id, description="EFS mount target of the shared model cache: NFS from the EKS nodes",
            tags=tags, opts=_opts(self))
        # the nodes' group is the cluster security group EKS makes and gives its managed nodes (providers/aws/storage.py
        # admit_lustre_clients): NFS from that group only, never from a range
        self.ingress = aws.vpc.SecurityGroupIngressRule(
            f"{name}-nfs-from-nodes", security_group_id=self.security_group.id, ip_protocol="tcp",
            from_port=NFS_PORT, to_port=NFS_PORT,
            referenced_security_group_id=eks.cluster.vpc_config.cluster_security_group_id,
            description="NFS from the EKS nodes", tags=tags, opts=_opts(self))
        # one mount target in the subnet of the fleet's node groups (providers/aws/kube.py node_group: subnet_ids
        # [net.subnet_id]); a node mounts through the mount target of its own zone (EFS User Guide, "Creating mount targets")
        self.mount_target = aws.efs.MountTarget(
            f"{name}-mount", file_system_id=self.file_system.id, subnet_id=net.subnet_id,
            security_groups=[self.security_group.id], opts=_opts(self))
        from .kube import KubeObject  # a Kubernetes object of the cluster's provider

        # after the driver and the mount target: a claim provisioned before either waits or fails its first mount
        self.storage_class = KubeObject(
            f"{name}-storageclass", storage_class(cache, self.file_system.id),
            eks.k8s_opts(self, depends_on=[self.mount_target, eks.addons["aws-efs-csi-driver"]]))
        self.register_outputs({"file_system": self.file_system.id})
