"""Every IAM policy the reference blueprint's Pulumi program records, asserted exactly (issue 24
item 6): each statement's Sid, Effect, Action, Resource, Principal and Condition, and every managed
policy attached to a role. A test that checks that a grant contains what a caller needs still passes
when the grant widens (a Resource becoming `*`, an action added, a condition dropped); these do not.

The plan runs under Pulumi's mocks (fleetform/plan.py), which name ids and ARNs `arn:aws:mock:::...`.
A change here is a change of what the machines and pods may do: review it as one, then update the
table. Why each statement is what it is lives beside the code that writes it (providers/aws/iam.py,
training.py, kube.py: the AWS Service Authorization Reference for each action's resource types and
condition keys).
"""

from __future__ import annotations

import json

from conftest import ROOT
from fleetform.pipeline import check
from fleetform.plan import record
from fleetform.render import render

EXPECTED = {'eks-cluster-autoscaler assumeRolePolicy': {'Statement': [{'Action': ['sts:AssumeRole', 'sts:TagSession'],
                                                            'Effect': 'Allow',
                                                            'Principal': {'Service': 'pods.eks.amazonaws.com'},
                                                            'Sid': 'AllowEksAuthToAssumeRoleForPodIdentity'}],
                                             'Version': '2012-10-17'},
 'eks-cluster-autoscaler policy': {'Statement': [{'Action': ['autoscaling:DescribeAutoScalingGroups',
                                                             'autoscaling:DescribeAutoScalingInstances',
                                                             'autoscaling:DescribeLaunchConfigurations',
                                                             'autoscaling:DescribeScalingActivities',
                                                             'ec2:DescribeImages',
                                                             'ec2:DescribeInstanceTypes',
                                                             'ec2:DescribeLaunchTemplateVersions',
                                                             'ec2:GetInstanceTypesFromInstanceRequirements',
                                                             'eks:DescribeNodegroup'],
                                                  'Effect': 'Allow',
                                                  'Resource': '*',
                                                  'Sid': 'Describe'},
                                                 {'Action': ['autoscaling:SetDesiredCapacity',
                                                             'autoscaling:TerminateInstanceInAutoScalingGroup'],
                                                  'Condition': {'Null': {'aws:ResourceTag/k8s.io/cluster-autoscaler/llm-70b_plan': 'false'}},
                                                  'Effect': 'Allow',
                                                  'Resource': '*',
                                                  'Sid': 'ScaleOwnGroups'}],
                                   'Version': '2012-10-17'},
 'iam-eks-cluster assumeRolePolicy': {'Statement': [{'Action': ['sts:AssumeRole', 'sts:TagSession'],
                                                     'Effect': 'Allow',
                                                     'Principal': {'Service': 'eks.amazonaws.com'}}],
                                      'Version': '2012-10-17'},
 'iam-eks-node assumeRolePolicy': {'Statement': [{'Action': 'sts:AssumeRole',
                                                  'Effect': 'Allow',
                                                  'Principal': {'Service': 'ec2.amazonaws.com'}}],
                                   'Version': '2012-10-17'},
 'train-controller assumeRolePolicy': {'Statement': [{'Action': 'sts:AssumeRole',
                                                      'Effect': 'Allow',
                                                      'Principal': {'Service': 'ec2.amazonaws.com'}}],
                                       'Version': '2012-10-17'},
 'train-controller policy': {'Statement': [{'Action': 'ec2:RunInstances',
                                            'Condition': {'StringEquals': {'aws:RequestTag/fleetform:cluster': 'llm-70b_plan',
                                                                           'aws:RequestTag/fleetform:fleet': 'train',
                                                                           'aws:RequestTag/fleetform:role': 'compute'}},
                                            'Effect': 'Allow',
                                            'Resource': 'arn:aws:ec2:*:*:instance/*',
                                            'Sid': 'LaunchComputeNodes'},
                                           {'Action': 'ec2:RunInstances',
                                            'Condition': {'ArnLike': {'ec2:LaunchTemplate': 'arn:aws:ec2:us-east-1:123456789012:launch-template/train-nodes-id'}},
                                            'Effect': 'Allow',
                                            'Resource': ['arn:aws:ec2:us-east-1:123456789012:launch-template/train-nodes-id',
                                                         'arn:aws:ec2:*:*:subnet/*',
                                                         'arn:aws:ec2:*:*:security-group/*',
                                                         'arn:aws:ec2:*:*:network-interface/*',
                                                         'arn:aws:ec2:*:*:volume/*',
                                                         'arn:aws:ec2:*::image/*',
                                                         'arn:aws:ec2:*:*:placement-group/*',
                                                         'arn:aws:ec2:*:*:capacity-reservation/*'],
                                            'Sid': 'LaunchFromTheFleetTemplate'},
                                           {'Action': 'ec2:CreateTags',
                                            'Condition': {'StringEquals': {'ec2:CreateAction': 'RunInstances'}},
                                            'Effect': 'Allow',
                                            'Resource': ['arn:aws:ec2:*:*:instance/*',
                                                         'arn:aws:ec2:*:*:volume/*',
                                                         'arn:aws:ec2:*:*:network-interface/*'],
                                            'Sid': 'TagAtLaunch'},
                                           {'Action': 'ec2:CreateTags',
                                            'Condition': {'ForAllValues:StringEquals': {'aws:TagKeys': ['Name',
                                                                                                        'fleetform:node']},
                                                          'StringEquals': {'aws:ResourceTag/fleetform:cluster': 'llm-70b_plan',
                                                                           'aws:ResourceTag/fleetform:fleet': 'train',
                                                                           'aws:ResourceTag/fleetform:role': 'compute'}},
                                            'Effect': 'Allow',
                                            'Resource': 'arn:aws:ec2:*:*:instance/*',
                                            'Sid': 'NameComputeNodes'},
                                           {'Action': ['ec2:DescribeCapacityReservations',
                                                       'ec2:DescribeInstances',
                                                       'ec2:DescribeInstanceTopology'],
                                            'Effect': 'Allow',
                                            'Resource': '*',
                                            'Sid': 'Describe'},
                                           {'Action': 'ec2:TerminateInstances',
                                            'Condition': {'StringEquals': {'aws:ResourceTag/fleetform:cluster': 'llm-70b_plan',
                                                                           'aws:ResourceTag/fleetform:fleet': 'train',
                                                                           'aws:ResourceTag/fleetform:role': 'compute'}},
                                            'Effect': 'Allow',
                                            'Resource': 'arn:aws:ec2:*:*:instance/*',
                                            'Sid': 'TerminateComputeNodes'},
                                           {'Action': 'iam:PassRole',
                                            'Condition': {'StringEquals': {'iam:PassedToService': 'ec2.amazonaws.com'}},
                                            'Effect': 'Allow',
                                            'Resource': 'arn:aws:mock:::role/train-node',
                                            'Sid': 'PassComputeRole'},
                                           {'Action': ['secretsmanager:GetSecretValue',
                                                       'secretsmanager:PutSecretValue'],
                                            'Effect': 'Allow',
                                            'Resource': 'arn:aws:mock:::secret/train-munge',
                                            'Sid': 'MungeKey'},
                                           {'Action': ['kms:Decrypt', 'kms:GenerateDataKey'],
                                            'Condition': {'StringEquals': {'kms:ViaService': 'secretsmanager.us-east-1.amazonaws.com'}},
                                            'Effect': 'Allow',
                                            'Resource': 'arn:aws:mock:::key/train-munge',
                                            'Sid': 'MungeKeyEncryption'},
                                           {'Action': ['s3:GetObject', 's3:GetObjectVersion'],
                                            'Effect': 'Allow',
                                            'Resource': 'arn:aws:mock:::bucket/rendered-bucket/fleetform/rendered.tar.gz',
                                            'Sid': 'RenderedArtifact'},
                                           {'Action': 'route53:ChangeResourceRecordSets',
                                            'Condition': {'ForAllValues:StringEquals': {'route53:ChangeResourceRecordSetsRecordTypes': ['A']},
                                                          'ForAllValues:StringLike': {'route53:ChangeResourceRecordSetsNormalizedRecordNames': ['*.train.llm-70b_plan.fleetform.internal']}},
                                            'Effect': 'Allow',
                                            'Resource': 'arn:aws:route53:::hostedzone/train-names-zone-id',
                                            'Sid': 'NodeNames'},
                                           {'Action': 'route53:ListResourceRecordSets',
                                            'Effect': 'Allow',
                                            'Resource': 'arn:aws:route53:::hostedzone/train-names-zone-id',
                                            'Sid': 'ReadNodeNames'}],
                             'Version': '2012-10-17'},
 'train-munge policy': {'Statement': [{'Action': ['secretsmanager:GetSecretValue', 'secretsmanager:PutSecretValue'],
                                       'Condition': {'StringNotEquals': {'aws:PrincipalArn': ['arn:aws:mock:::role/train-controller',
                                                                                              'arn:aws:mock:::role/train-node']}},
                                       'Effect': 'Deny',
                                       'Principal': '*',
                                       'Resource': 'arn:aws:mock:::secret/train-munge',
                                       'Sid': 'OnlyThisCluster'}],
                        'Version': '2012-10-17'},
 'train-node assumeRolePolicy': {'Statement': [{'Action': 'sts:AssumeRole',
                                                'Effect': 'Allow',
                                                'Principal': {'Service': 'ec2.amazonaws.com'}}],
                                 'Version': '2012-10-17'},
 'train-node-munge policy': {'Statement': [{'Action': 'secretsmanager:GetSecretValue',
                                            'Effect': 'Allow',
                                            'Resource': 'arn:aws:mock:::secret/train-munge',
                                            'Sid': 'MungeKey'},
                                           {'Action': 'kms:Decrypt',
                                            'Condition': {'StringEquals': {'kms:ViaService': 'secretsmanager.us-east-1.amazonaws.com'}},
                                            'Effect': 'Allow',
                                            'Resource': 'arn:aws:mock:::key/train-munge',
                                            'Sid': 'MungeKeyEncryption'}],
                             'Version': '2012-10-17'},
 'train-node-s3 policy': {'Statement': [{'Action': ['s3:GetObject', 's3:GetObjectVersion'],
                                         'Effect': 'Allow',
                                         'Resource': 'arn:aws:mock:::bucket/rendered-bucket/fleetform/rendered.tar.gz',
                                         'Sid': 'RenderedArtifact'},
                                        {'Action': 's3:ListBucketVersions',
                                         'Condition': {'StringEquals': {'s3:prefix': 'fleetform/rendered.tar.gz'}},
                                         'Effect': 'Allow',
                                         'Resource': 'arn:aws:mock:::bucket/rendered-bucket',
                                         'Sid': 'RenderedArtifactVersions'},
                                        {'Action': ['s3:GetObject',
                                                    's3:PutObject',
                                                    's3:DeleteObject',
                                                    's3:ListBucket',
                                                    's3:GetBucketLocation'],
                                         'Effect': 'Allow',
                                         'Resource': ['arn:aws:mock:::bucket/storage-checkpoints',
                                                      'arn:aws:mock:::bucket/storage-checkpoints/*'],
                                         'Sid': 'OwnBuckets'}],
                          'Version': '2012-10-17'}}

ATTACHED = [('iam-eks-cluster-policy', 'iam-eks-cluster', 'arn:aws:iam::aws:policy/AmazonEKSClusterPolicy'),
 ('iam-eks-node-AmazonEC2ContainerRegistryReadOnly',
  'iam-eks-node',
  'arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly'),
 ('iam-eks-node-AmazonEKSWorkerNodePolicy', 'iam-eks-node', 'arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy'),
 ('iam-eks-node-AmazonEKS_CNI_Policy', 'iam-eks-node', 'arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy'),
 ('iam-eks-node-AmazonSSMManagedInstanceCore',
  'iam-eks-node',
  'arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore'),
 ('train-controller-ssm', 'train-controller', 'arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore'),
 ('train-controller-state', None, None),
 ('train-node-ssm', 'train-node', 'arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore')]
"""(attachment, role, managed policy ARN)."""


def _reference_plan():
    model = check(ROOT / "blueprints/reference.yaml").model
    assert model is not None
    return record(model, render(model))


def test_every_iam_policy_of_the_reference_plan_is_exactly_this():
    resources = _reference_plan()
    policies = {}
    attached = []
    for r in resources:
        inputs = r["inputs"]
        for key in ("policy", "assumeRolePolicy"):
            if r["type"].startswith("aws:") and isinstance(inputs.get(key), str) and inputs[key].startswith("{"):
                policies[f"{r['name']} {key}"] = json.loads(inputs[key])
        if "Attachment" in r["type"]:
            attached.append((r["name"], inputs.get("role"), inputs.get("policyArn")))
    assert sorted(policies) == sorted(EXPECTED)
    for name, document in EXPECTED.items():
        assert policies[name] == document, name
    assert sorted(attached) == ATTACHED


def test_no_allow_statement_grants_every_action_or_an_unconditioned_write_on_every_resource():
    """Where a grant's Resource is `*`, its actions only describe (they take no resource: AWS Service
    Authorization Reference) or a condition scopes them; no statement allows `*` actions."""
    for name, document in EXPECTED.items():
        for statement in document["Statement"]:
            actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
            assert all("*" not in a for a in actions), name
            if statement["Effect"] == "Allow" and statement.get("Resource") == "*" and "Condition" not in statement:
                assert all(a.split(":")[1].startswith(("Describe", "Get")) for a in actions), (name, statement)
