"""Storage of a blueprint: FSx for Lustre file systems, S3 buckets, and the bucket of rendered files."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from fleetform.model import Blueprint

from .common import LUSTRE_VERSION, _opts, _protect_bucket


class Storage(pulumi.ComponentResource):
    """FSx for Lustre PERSISTENT_2 file systems with their S3 data repository association, and S3
    buckets (checkpoints), each encrypted and closed to the public."""

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
                        f"{base}-dra", file_system_id=fs.id, file_system_path="/",
                        data_repository_path=item.import_path, batch_import_meta_data_on_create=True,
                        s3={"auto_import_policy": {"events": ["NEW", "CHANGED", "DELETED"]}},
                        tags=tags, opts=_opts(self))
                self.file_systems[item.name] = fs
            else:
                bucket = aws.s3.Bucket(base, bucket_prefix=f"{bp.name}-{item.name}-"[:37], force_destroy=False,
                                       tags=tags, opts=_opts(self))
                _protect_bucket(base, bucket, self, item.versioning, item.noncurrent_expiry_days)
                self.buckets[item.name] = bucket
        self.register_outputs({"buckets": {k: b.bucket for k, b in self.buckets.items()}})


class RenderedFiles(pulumi.ComponentResource):
    """The rendered files in a bucket of their own, byte for byte what `fleetform render` wrote and
    reviewers read; nodes install them from here after checking their sha256."""

    def __init__(self, name: str, bp: Blueprint, files: dict[str, bytes], tags: dict,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("fleetform:aws:RenderedFiles", name, None, opts)
        bucket = aws.s3.Bucket(f"{name}-bucket", bucket_prefix=f"{bp.name}-config-"[:37], tags=tags, opts=_opts(self))
        _protect_bucket(f"{name}-bucket", bucket, self, True, 90)
        self.prefix = f"{bp.version}/"
        for path, data in sorted(files.items()):
            aws.s3.BucketObjectv2(f"{name}-{path}", bucket=bucket.id, key=f"{self.prefix}{path}",
                                  content=data.decode("utf-8"), content_type="text/plain; charset=utf-8",
                                  server_side_encryption="aws:kms", tags=tags, opts=_opts(self))
        self.bucket = bucket
        self.register_outputs({"bucket": bucket.bucket, "prefix": self.prefix})


