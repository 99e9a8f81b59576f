"""The network of a blueprint: VPC, subnets, NAT and S3 endpoint (or the user's own), and the
fleets' security group."""

from __future__ import annotations

import ipaddress

import pulumi
import pulumi_aws as aws

from fleetform.model import Blueprint

from .common import LUSTRE_PORTS, _opts


class Network(pulumi.ComponentResource):
    """A VPC with a private subnet in the blueprint's zone, egress through a NAT gateway, and an S3
    gateway endpoint (S3 traffic stays off the NAT); or the existing vpc_id and subnet_id."""

    def __init__(self, name: str, bp: Blueprint, tags: dict, opts: pulumi.ResourceOptions | None = None):
        super().__init__("fleetform:aws:Network", name, None, opts)
        net = bp.network
        zone = bp.availability_zone or f"{bp.region}a"
        second = zone[:-1] + ("b" if zone[-1] != "b" else "a")
        if net.vpc_id:
            self.vpc_id = pulumi.Output.from_input(net.vpc_id)
            self.subnet_id = pulumi.Output.from_input(net.subnet_id)
            # the EKS control plane's subnets: the nodes' and the blueprint's provider.eks.subnet_ids, in two
            # zones or more (rule eks-subnets; EKS User Guide, "VPC and subnet requirements": "at least two
            # subnets that are in different Availability Zones")
            extra = bp.cluster.subnet_ids if bp.cluster is not None else ()
            self.subnet_ids = [self.subnet_id] + [pulumi.Output.from_input(s) for s in extra if s != net.subnet_id]
            # the zone of the user's subnet, looked up at deploy time (volumes must be in the instance's zone)
            self.zone = aws.ec2.get_subnet_output(id=net.subnet_id).availability_zone
            self.register_outputs({"vpc_id": self.vpc_id, "subnet_id": self.subnet_id})
            return


        block = ipaddress.ip_network(net.cidr)
        quarters = list(block.subnets(prefixlen_diff=2))
        vpc = aws.ec2.Vpc(f"{name}-vpc", cidr_block=net.cidr, enable_dns_hostnames=True, enable_dns_support=True,
                          tags={**tags, "Name": f"{bp.name}"}, opts=_opts(self))
        igw = aws.ec2.InternetGateway(f"{name}-igw", vpc_id=vpc.id, tags=tags, opts=_opts(self))
        public = aws.ec2.Subnet(f"{name}-public", vpc_id=vpc.id, cidr_block=str(quarters[3]), availability_zone=zone,
                                map_public_ip_on_launch=False, tags={**tags, "Name": f"{bp.name}-public"},
                                opts=_opts(self))
        private = aws.ec2.Subnet(f"{name}-private", vpc_id=vpc.id, cidr_block=str(quarters[0]), availability_zone=zone,
                                 tags={**tags, "Name": f"{bp.name}-private"}, opts=_opts(self))
        # a second private subnet in another zone: EKS control planes need two zones (nodes stay in one)
        private_b = aws.ec2.Subnet(f"{name}-private-b", vpc_id=vpc.id, cidr_block=str(quarters[1]),
                                   availability_zone=second, tags={**tags, "Name": f"{bp.name}-private-b"},
                                   opts=_opts(self))
        eip = aws.ec2.Eip(f"{name}-nat-ip", domain="vpc", tags=tags, opts=_opts(self, depends_on=[igw]))
        nat = aws.ec2.NatGateway(f"{name}-nat", allocation_id=eip.id, subnet_id=public.id, tags=tags, opts=_opts(self))
        public_rt = aws.ec2.RouteTable(f"{name}-public-rt", vpc_id=vpc.id,
                                       routes=[{"cidr_block": "0.0.0.0/0", "gateway_id": igw.id}], tags=tags,
                                       opts=_opts(self))
        private_rt = aws.ec2.RouteTable(f"{name}-private-rt", vpc_id=vpc.id,
                                        routes=[{"cidr_block": "0.0.0.0/0", "nat_gateway_id": nat.id}], tags=tags,
                                        opts=_opts(self))
        aws.ec2.RouteTableAssociation(f"{name}-public-rta", subnet_id=public.id, route_table_id=public_rt.id,
                                      opts=_opts(self))
        for key, subnet in (("private-rta", private), ("private-b-rta", private_b)):
            aws.ec2.RouteTableAssociation(f"{name}-{key}", subnet_id=subnet.id, route_table_id=private_rt.id,
                                          opts=_opts(self))
        aws.ec2.VpcEndpoint(f"{name}-s3", vpc_id=vpc.id, service_name=f"com.amazonaws.{bp.region}.s3",
                            vpc_endpoint_type="Gateway", route_table_ids=[private_rt.id], tags=tags, opts=_opts(self))
        self.vpc_id = vpc.id
        self.subnet_id = private.id
        self.subnet_ids = [private.id, private_b.id]
        self.zone = pulumi.Output.from_input(zone)
        self.register_outputs({"vpc_id": self.vpc_id, "subnet_id": self.subnet_id})


class Security(pulumi.ComponentResource):
    """The fleets' security group: all traffic between its members (EFA needs it), FSx for Lustre
    ports within it, SSH only from the blueprint's ssh_ingress_cidrs, egress open."""

    def __init__(self, name: str, bp: Blueprint, vpc_id, tags: dict, opts: pulumi.ResourceOptions | None = None):
        super().__init__("fleetform:aws:Security", name, None, opts)
        group = aws.ec2.SecurityGroup(f"{name}-nodes", vpc_id=vpc_id, description=f"fleetform {bp.name} nodes",
                                      tags={**tags, "Name": f"{bp.name}-nodes"}, opts=_opts(self))
        aws.vpc.SecurityGroupIngressRule(f"{name}-self-in", security_group_id=group.id, ip_protocol="-1",
                                         referenced_security_group_id=group.id,
                                         description="all traffic between fleet members (EFA, NCCL, Slurm)",
                                         tags=tags, opts=_opts(self))
        aws.vpc.SecurityGroupEgressRule(f"{name}-self-out", security_group_id=group.id, ip_protocol="-1",
                                        referenced_security_group_id=group.id,
                                        description="all traffic between fleet members (EFA requires it)",
                                        tags=tags, opts=_opts(self))
        aws.vpc.SecurityGroupEgressRule(f"{name}-egress", security_group_id=group.id, ip_protocol="-1",
                                        cidr_ipv4="0.0.0.0/0", description="outbound (packages, images, AWS APIs)",
                                        tags=tags, opts=_opts(self))
        for low, high in LUSTRE_PORTS:
            aws.vpc.SecurityGroupIngressRule(f"{name}-lustre-{low}", security_group_id=group.id, ip_protocol="tcp",
                                             from_port=low, to_port=high, referenced_security_group_id=group.id,
                                             description="FSx for Lustre", tags=tags, opts=_opts(self))
        for index, cidr in enumerate(bp.network.ssh_ingress_cidrs):
            aws.vpc.SecurityGroupIngressRule(f"{name}-ssh-{index}", security_group_id=group.id, ip_protocol="tcp",
                                             from_port=22, to_port=22,
                                             # the network the range names (1.2.3.4/0 is 0.0.0.0/0): EC2
                                             # stores rules by network address
                                             cidr_ipv4=str(ipaddress.ip_network(cidr, strict=False)),
                                             description="SSH from ssh_ingress_cidrs", tags=tags, opts=_opts(self))
        self.group_id = group.id
        self.register_outputs({"group_id": self.group_id})


