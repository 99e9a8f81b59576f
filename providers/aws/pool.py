"""The EKS side of a pool shared by time (fleetform/pool.py): the inference fleet's node group follows the pool's
schedule by scheduled actions on its Auto Scaling group.

EKS makes one Auto Scaling group per managed node group and names it in the node group's
`resources[0].autoscaling_groups[0].name` (EKS API Nodegroup.resources.autoScalingGroups). Each
pool.ScalingAction becomes an `aws.autoscaling.Schedule` on that group (PutScheduledUpdateGroupAction) that sets
the group's minimum, desired capacity and maximum to the nodes the fleet holds from then on, in the pool's time
zone (AWS applies its daylight-saving rules to each occurrence). A rise runs the pool's warm-up lead early (node
ready, image pull, startup probe budget); a fall runs at the hour the window closes, and the training fleet's lend
ends the pool's release lag later, once EKS has drained the nodes and EC2 has freed their capacity
(fleetform/pool.py Handover).

The node group's own scaling_config is the size it is created with; after that the scheduled actions own it.
EKS reports the Auto Scaling group's sizes as the node group's (the EKS API's NodegroupScalingConfig: the Cluster
Autoscaler alters desiredSize; a schedule that changes the group's min_size shows as drift on the node group,
terraform-aws-modules/terraform-aws-eks#1222), and an update of the node group sends its whole scaling_config,
minimum, maximum and desired size together (terraform-provider-aws internal/service/eks/node_group.go,
resourceNodeGroupUpdate -> expandNodegroupScalingConfig -> UpdateNodegroupConfig). So a pooled node group
ignores changes of its whole scaling_config (POOLED_SCALING_IGNORED): a later `pulumi up` sends no size that
would undo the window now open, and a changed share of the pool reaches the group through the changed scheduled
actions at their next occurrence. A `pulumi up` in the middle of a window creates the actions without running
them: the group has its floor until the Cluster Autoscaler adds nodes for the KEDA cron minimum's pending pods,
or the next action runs.

An action is never updated in place: an update sends the StartTime the provider stored when AWS computed it at
creation (terraform-provider-aws resourceSchedulePut; hashicorp/terraform-provider-aws#38983, pulumi/pulumi-aws#2473),
which AWS refuses once it has passed ("Given start time is in the past") or keeps, running the action at the old
time. Its name carries its time, days and sizes, so a change of those makes a new action; what remains (the pool's
time zone) replaces it, deleting the old one first: both have one name on one group, and
PutScheduledUpdateGroupAction is an upsert that keeps what it is not sent.
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from fleetform.model import Fleet

from .common import _opts

POOLED_SCALING_IGNORED = ("scalingConfig.desiredSize", "scalingConfig.minSize", "scalingConfig.maxSize")
"""What a pooled inference fleet's node group leaves to its scheduled actions after creation (module docstring):
the whole scaling_config, named field by field (the desired size is the autoscaler's on every node group)."""


SCHEDULE_REPLACED_ON = ("desiredCapacity", "maxSize", "minSize", "recurrence", "timeZone")
"""The inputs of a scheduled action whose change replaces it rather than update it in place (module docstring)."""


def asg_name(node_group: aws.eks.NodeGroup) -> pulumi.Output:
    """The name of the Auto Scaling group EKS made for a managed node group."""
    return node_group.resources.apply(lambda resources: resources[0].autoscaling_groups[0].name)


def schedules(name: str, fleet: Fleet, node_group: aws.eks.NodeGroup, parent: pulumi.Resource) -> list:
    """One aws.autoscaling.Schedule per scheduled action of the fleet (fleet.pool_scaling), named after it; none,
    and no reading of the node group's Auto Scaling group, for a fleet outside a pool."""
    if not fleet.pool_scaling:
        return []
    group = asg_name(node_group)
    return [aws.autoscaling.Schedule(
        f"{name}-schedule-{action.name}", autoscaling_group_name=group, scheduled_action_name=action.name,
        recurrence=action.recurrence, time_zone=action.time_zone,
        # all three sizes, never the provider's defaults: each action states the fleet's whole share then
        min_size=action.nodes, desired_capacity=action.nodes, max_size=action.nodes,
        opts=_opts(parent, depends_on=[node_group], replace_on_changes=list(SCHEDULE_REPLACED_ON),
                   delete_before_replace=True)) for action in fleet.pool_scaling]
