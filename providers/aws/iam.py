"""IAM of a blueprint: the node roles and instance profile, and the EKS roles."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from fleetform.model import Blueprint

from .common import _opts, _policy


class Iam(pulumi.ComponentResource):
    """What the blueprint's roles share (the EC2 trust policy, the rendered artifact's ARN, the own
    buckets), the EKS cluster and node roles for inference fleets, and `compute_role`, which each
    training fleet calls for a role of its own."""

    def __init__(self, name: str, bp: Blueprint, bucket_arns: list, rendered, tags: dict,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__("fleetform:aws:Iam", name, None, opts)
        ec2_trust = _policy({"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]})
        self.ec2_trust = ec2_trust
        self.artifact_arn = pulumi.Output.concat(rendered.bucket.arn, "/", rendered.key)
        self.bucket_arns = bucket_arns
        self.artifact_bucket_arn = rendered.bucket.arn
        self.artifact_key = rendered.key
        self.eks_cluster_role = self.eks_node_role = None
        if bp.cluster is not None:  # the inference fleets and Ray training fleets of the one EKS cluster
            eks_trust = _policy({"Version": "2012-10-17", "Statement": [
                {"Effect": "Allow", "Principal": {"Service": "eks.amazonaws.com"},
                 "Action": ["sts:AssumeRole", "sts:TagSession"]}]})
            self.eks_cluster_role = aws.iam.Role(f"{name}-eks-cluster", assume_role_policy=eks_trust, tags=tags,
                                                 opts=_opts(self))
            aws.iam.RolePolicyAttachment(f"{name}-eks-cluster-policy", role=self.eks_cluster_role.name,
                                         policy_arn="arn:aws:iam::aws:policy/AmazonEKSClusterPolicy", opts=_opts(self))
            self.eks_node_role = aws.iam.Role(f"{name}-eks-node", assume_role_policy=ec2_trust, tags=tags,
                                              opts=_opts(self))
            for policy in ("AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryReadOnly",
                           "AmazonSSMManagedInstanceCore"):
                aws.iam.RolePolicyAttachment(f"{name}-eks-node-{policy}", role=self.eks_node_role.name,
                                             policy_arn=f"arn:aws:iam::aws:policy/{policy}", opts=_opts(self))
        self.register_outputs({})

    def compute_role(self, name: str, parent: pulumi.Resource, tags: dict) -> tuple:
        """The role and instance profile of ONE training fleet's compute nodes: SSM, the rendered
        artifact (read only: a node must not rewrite what the controller installs), the blueprint's
        own buckets (checkpoints); the fleet adds the read of its own munge key. One role per fleet
        (as AWS ParallelCluster gives each queue its own): with one role for every training fleet,
        each fleet's nodes could read every other fleet's munge key and forge credentials there.
        Its tag fleetform:role names the caller whose calls (providers/aws/calls.py) it must allow."""
        role = aws.iam.Role(f"{name}-node", assume_role_policy=self.ec2_trust,
                            tags={**tags, "fleetform:role": "compute"}, opts=_opts(parent))
        aws.iam.RolePolicyAttachment(f"{name}-node-ssm", role=role.name,
                                     policy_arn="arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore",
                                     opts=_opts(parent))
        document = pulumi.Output.all(self.artifact_arn, self.artifact_bucket_arn, *self.bucket_arns).apply(
            lambda arns: _policy({"Version": "2012-10-17", "Statement": [
                {"Sid": "RenderedArtifact", "Effect": "Allow", "Action": ["s3:GetObject", "s3:GetObjectVersion"],
                 "Resource": arns[0]},
                # the Prolog lists the artifact's versions (bin/update --job), only under its key
                {"Sid": "RenderedArtifactVersions", "Effect": "Allow", "Action": "s3:ListBucketVersions",
                 "Resource": arns[1], "Condition": {"StringEquals": {"s3:prefix": self.artifact_key}}}] + ([
                {"Sid": "OwnBuckets", "Effect": "Allow",
                 "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:ListBucket", "s3:GetBucketLocation"],
                 "Resource": sorted(list(arns[2:]) + [f"{a}/*" for a in arns[2:]])}] if arns[2:] else [])}))
        aws.iam.RolePolicy(f"{name}-node-s3", role=role.id, policy=document, opts=_opts(parent))
        profile = aws.iam.InstanceProfile(f"{name}-node", role=role.name, tags=tags, opts=_opts(parent))
        return role, profile


POD_IDENTITY_TRUST = _policy({"Version": "2012-10-17", "Statement": [
    {"Sid": "AllowEksAuthToAssumeRoleForPodIdentity", "Effect": "Allow",
     "Principal": {"Service": "pods.eks.amazonaws.com"}, "Action": ["sts:AssumeRole", "sts:TagSession"]}]})
"""The trust policy EKS Pod Identity requires of a role (EKS User Guide, "Create IAM role with trust
policy required by EKS Pod Identity"): AssumeRole, and TagSession for the session tags it adds."""

CLUSTER_AUTOSCALER_ACTIONS = {
    "Describe": ["autoscaling:DescribeAutoScalingGroups", "autoscaling:DescribeAutoScalingInstances",
                 "autoscaling:DescribeLaunchConfigurations", "autoscaling:DescribeScalingActivities",
                 "ec2:DescribeImages", "ec2:DescribeInstanceTypes", "ec2:DescribeLaunchTemplateVersions",
                 "ec2:GetInstanceTypesFromInstanceRequirements", "eks:DescribeNodegroup"],
    "Scale": ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"],
}
"""The Cluster Autoscaler's "Full Cluster Autoscaler Features Policy" for auto-discovery
(kubernetes/autoscaler cluster-autoscaler/cloudprovider/aws/README.md, section Permissions)."""


def cluster_autoscaler_policy(cluster_name: str) -> str:
    """Describe anything; scale only the Auto Scaling groups tagged as this cluster's (EKS puts
    k8s.io/cluster-autoscaler/<cluster> on a managed node group's Auto Scaling group; the README
    recommends restricting the scaling actions by tag): the tag must exist, whatever its value."""
    return _policy({"Version": "2012-10-17", "Statement": [
        {"Sid": "Describe", "Effect": "Allow", "Action": CLUSTER_AUTOSCALER_ACTIONS["Describe"], "Resource": "*"},
        {"Sid": "ScaleOwnGroups", "Effect": "Allow", "Action": CLUSTER_AUTOSCALER_ACTIONS["Scale"], "Resource": "*",
         "Condition": {"Null": {f"aws:ResourceTag/k8s.io/cluster-autoscaler/{cluster_name}": "false"}}}]})
