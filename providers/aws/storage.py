"""Storage of a blueprint: FSx for Lustre file systems, S3 buckets, and the bucket of rendered files."""

from __future__ import annotations

import base64
import hashlib

import pulumi
import pulumi_aws as aws

from fleetform.model import IMPORT_DIR, Blueprint
from fleetform.render.archive import archive

from .common import LUSTRE_PORTS, LUSTRE_VERSION, _opts, _protect_bucket

ARTIFACT_KEY = "fleetform/rendered.tar.gz"
"""The one object of the rendered files: a stable key (the bucket keeps every version), so the user
data that names it never changes with a render and no instance is replaced for a new config."""


class Storage(pulumi.ComponentResource):
    """FSx for Lustre PERSISTENT_2 file systems, and S3 buckets (checkpoints), each encrypted and
    closed to the public. A file system's import_path is linked import-only at <mount>/data; a
    training fleet's checkpoint directory on it is exported to the fleet's bucket by an association of
    its own, so checkpoints reach S3 and never the training-data prefix."""

    def __init__(self, name: str, bp: Blueprint, subnet_id, group_id, tags: dict,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("fleetform:aws:Storage", name, None, opts)
        self.file_systems: dict[str, aws.fsx.LustreFileSystem] = {}
        self.buckets: dict[str, aws.s3.Bucket] = {}
        for item in bp.storage:
            base = f"{name}-{item.name}"
            if item.type == "fsx-lustre":
                fs = aws.fsx.LustreFileSystem(
                    base, deployment_type="PERSISTENT_2", storage_capacity=item.capacity_gib,
                    per_unit_storage_throughput=item.throughput_mb_per_tib, subnet_ids=subnet_id,
                    security_group_ids=[group_id], file_system_type_version=LUSTRE_VERSION,
                    data_compression_type="LZ4", tags={**tags, "Name": f"{bp.name}-{item.name}"}, opts=_opts(self))
                if item.import_path:
                    aws.fsx.DataRepositoryAssociation(
                        f"{base}-dra", file_system_id=fs.id, file_system_path=IMPORT_DIR,
                        data_repository_path=item.import_path, batch_import_meta_data_on_create=True,
                        s3={"auto_import_policy": {"events": ["NEW", "CHANGED", "DELETED"]}},
                        tags=tags, opts=_opts(self))
                self.file_systems[item.name] = fs
            else:
                bucket = aws.s3.Bucket(base, bucket_prefix=f"{bp.name}-{item.name}-"[:37], force_destroy=False,
                                       tags=tags, opts=_opts(self))
                _protect_bucket(base, bucket, self, item.versioning, item.noncurrent_expiry_days)
                self.buckets[item.name] = bucket
        exports = {}
        for fleet in bp.fleets:
            export = fleet.checkpoint.export if fleet.checkpoint is not None else None
            if export is not None:  # one association per directory, whichever fleets write there
                exports.setdefault((export.file_system, export.directory), export)
        for (fs_name, directory), export in sorted(exports.items()):
            bucket = self.buckets[export.bucket]
            aws.fsx.DataRepositoryAssociation(
                f"{name}-{fs_name}-export{directory.replace('/', '-')}", file_system_id=self.file_systems[fs_name].id,
                file_system_path=directory,
                data_repository_path=bucket.bucket.apply(lambda b, p=export.prefix: f"s3://{b}/{p}"),
                s3={"auto_export_policy": {"events": ["NEW", "CHANGED", "DELETED"]}},
                tags=tags, opts=_opts(self))
        self.register_outputs({"buckets": {k: b.bucket for k, b in self.buckets.items()}})


def admit_lustre_clients(name: str, storage: Storage, file_system_group, clients_group, tags: dict) -> list:
    """Ingress on the file systems' security group for Lustre (TCP 988 and 1018-1023) from another group of
    clients: the EKS nodes, whose group is the cluster security group EKS makes (a managed node group's launch
    template without security groups gets it: EKS User Guide, "Customize managed nodes with launch templates").
    An FSx for Lustre file system admits only what its security groups admit on these ports (FSx for Lustre
    User Guide, "File system access control with Amazon VPC"); the training nodes are in the file systems' own
    group, which network.Security already admits."""
    return [aws.vpc.SecurityGroupIngressRule(
        f"{name}-lustre-{low}", security_group_id=file_system_group, ip_protocol="tcp", from_port=low, to_port=high,
        referenced_security_group_id=clients_group, description="FSx for Lustre from the EKS nodes",
        tags=tags, opts=_opts(storage)) for low, high in LUSTRE_PORTS]


def file_system_outputs(storage: Storage) -> dict:
    """What a static PersistentVolume of the FSx CSI driver names for each file system (kubernetes-sigs/
    aws-fsx-csi-driver examples/kubernetes/static_provisioning: volumeHandle = the file system id,
    volumeAttributes dnsname and mountname), exported as the stack output `fsx`."""
    return {name: {"file_system_id": fs.id, "dns_name": fs.dns_name, "mount_name": fs.mount_name}
            for name, fs in sorted(storage.file_systems.items())}


class RenderedFiles(pulumi.ComponentResource):
    """The rendered files as ONE object in a bucket of their own: a deterministic gzip'd tar of the
    folder `fleetform render` wrote and reviewers read, manifest.json at its root. Nodes check every
    file against manifest.json before they install it. One object whatever the number of files, so
    the plan (and `pulumi up`) does not grow with the rendered files."""

    def __init__(self, name: str, bp: Blueprint, files: dict[str, bytes], tags: dict,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("fleetform:aws:RenderedFiles", name, None, opts)
        bucket = aws.s3.Bucket(f"{name}-bucket", bucket_prefix=f"{bp.name}-config-"[:37], tags=tags, opts=_opts(self))
        _protect_bucket(f"{name}-bucket", bucket, self, True, 90)
        self.manifest_sha256 = hashlib.sha256(files["manifest.json"]).hexdigest()
        self.key = ARTIFACT_KEY
        self.object = aws.s3.BucketObjectv2(
            f"{name}-artifact", bucket=bucket.id, key=self.key,
            content_base64=base64.b64encode(archive(files)).decode("ascii"), content_type="application/gzip",
            server_side_encryption="aws:kms",
            tags={**tags, "fleetform:manifest-sha256": self.manifest_sha256}, opts=_opts(self))
        self.bucket = bucket
        self.register_outputs({"bucket": bucket.bucket, "key": self.key})
