"""An inference fleet on the blueprint's EKS cluster: its GPU node group and its rendered objects."""

from __future__ import annotations

import pulumi

from fleetform.cluster import ROOT_GIB
from fleetform.model import Blueprint, Fleet

from .common import _user_data
from .kube import EARLY_KINDS, EksCluster, KubeObject, launch_template, node_group, objects_of
from .pool import POOLED_SCALING_IGNORED, schedules

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


SECRET_CONFIG = "fleetform:secret-{name}"
"""The Pulumi secret config key that holds the value of the Kubernetes Secret `name` the models read
(hf_token_secret, api_key_secret): `pulumi config set --secret fleetform:secret-hf-token`. The program
creates each such Secret in the fleet's namespace, which only this run creates; the value stays a Pulumi
secret (encrypted in the state), never in a rendered file, plan.json or a command line."""


def fleet_secrets(fleet: Fleet) -> dict[tuple[str, str], tuple[str, ...]]:
    """(namespace, Secret name) -> the keys the fleet's pods read from it (a secret volume's items,
    an environment variable's secretKeyRef)."""
    out: dict[tuple[str, str], set[str]] = {}
    for server in fleet.kube.servers if fleet.kube is not None else ():
        for volume in server.volumes:
            if volume.kind == "secret":
                out.setdefault((server.namespace, volume.source), set()).update(k for k, _ in volume.items)
        for env in server.secret_env:
            out.setdefault((server.namespace, env.secret), set()).add(env.key)
    return {key: tuple(sorted(keys)) for key, keys in sorted(out.items())}


def secret_config_keys(bp: Blueprint) -> list[str]:
    """The Pulumi config keys `pulumi up` needs for the blueprint's Secrets, sorted."""
    names = {name for fleet in bp.fleets for (_, name) in fleet_secrets(fleet)} if bp.cluster is not None else set()
    return sorted(SECRET_CONFIG.format(name=name) for name in names)


class InferenceFleet(pulumi.ComponentResource):
    """A managed GPU node group with the NVIDIA AMI, the nvidia.com/gpu taint and the labels the
    rendered manifests select on, on the blueprint's shared cluster; then the fleet's rendered
    objects. Every child is named after the fleet, so adding or removing another fleet renames
    nothing here."""

    TYPE = "fleetform:aws:InferenceFleet"  # the component's type token: part of every child's URN

    def __init__(self, name: str, fleet: Fleet, eks: EksCluster, files: dict[str, bytes], tags: dict,
                 opts: pulumi.ResourceOptions | None = None):
        super().__init__(self.TYPE, name, None, opts)
        self.name, self.eks = name, eks
        # a Deployment is ready once its weights are loaded: wait as long as its startup probe may
        startup = max((p.period_s * p.failure_threshold for s in (fleet.kube.servers if fleet.kube else ()) for p in s.probes
                       if p.kind == "startup"), default=0)
        self.wait = pulumi.CustomTimeouts(create=f"{startup + 600}s", update=f"{startup + 600}s")
        tags = {**tags, "fleetform:fleet": fleet.cloud_name}  # a rename rolls no node
        group = next(g for g in eks.model.node_groups if g.fleet == fleet.name)
        self._files = files  # the rendered user data (_launch_template)
        template = self._launch_template(f"{name}-nodes", fleet, group, tags)
        pooled = {"ignore_changes": POOLED_SCALING_IGNORED} if fleet.pool_scaling else {}
        self.node_group = node_group(f"{name}-gpu", eks, group, "AL2023_x86_64_NVIDIA", template, tags, self,
                                     [eks.addons["vpc-cni"]], **pooled)
        self.schedules = schedules(name, fleet, self.node_group, self)  # a pool's windows (providers/aws/pool.py)
        objects = [o for o in objects_of(files, fleet.name) if eks.claim(o)] if f"{fleet.name}/k8s/kustomization.yaml" in files else []
        self._late = [o for o in objects if o["kind"] not in EARLY_KINDS]
        self._gateway = fleet.inference_gateway
        namespaces = [self._object(o, [eks.system]) for o in objects if o["kind"] == "Namespace"]
        self.early = namespaces + [self._object(o, namespaces + list(eks.namespaces.values()))
                                   for o in objects if o["kind"] in EARLY_KINDS - {"Namespace"}]
        config = pulumi.Config("fleetform")
        for (namespace, secret), keys in fleet_secrets(fleet).items():
            obj = {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                   "metadata": {"name": secret, "namespace": namespace,
                                "labels": {"app.kubernetes.io/managed-by": "fleetform"}}}
            if eks.claim(obj):
                key = SECRET_CONFIG.format(name=secret).split(":", 1)[1]
                value = config.require_secret(key)
                self.early.append(self._object({**obj, "stringData": {k: value for k in keys}},
                                               namespaces + list(eks.namespaces.values())))
        self.register_outputs({})

    def _launch_template(self, name: str, fleet: Fleet, group, tags: dict):
        from .lws import launch_extras  # replicas spanning nodes: EFA and a placement group

        # the rendered user data (fleetform/render/prepull.py): the image pre-pull, and the RAID0 NodeConfig on
        # local NVMe; a changed image list is a new launch template version, so EKS rolls the group's nodes
        rendered = self._files.get(f"{fleet.name}/node/user-data")
        data = rendered if rendered is not None else LOCAL_NVME_NODECONFIG if group.local_nvme else None
        return launch_template(name, group, _user_data(data) if data is not None else None, tags,
                               self, ROOT_GIB, **launch_extras(self, fleet, tags))

    def _object(self, obj: dict, depends_on: list) -> KubeObject:
        meta = obj["metadata"]
        name = "-".join(p for p in (self.name, obj["kind"].lower(), meta.get("namespace"), meta["name"]) if p)
        opts = self.eks.k8s_opts(self, depends_on)
        if obj["kind"] in ("Deployment", "LeaderWorkerSet"):
            opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(custom_timeouts=self.wait))
        return KubeObject(name, obj, opts)

    def apply(self) -> None:
        """The objects that use the releases' CRDs and the fleet's node group: after both."""
        after = [self.node_group, *self.early, *self.eks.crds, *self.eks.releases.values()]
        # a Gateway after the GatewayParameters it names: kgateway provisions the proxy as soon as it sees the
        # Gateway, and its default proxy Service is an internet-facing LoadBalancer (fleetform/gateway.py PROXY_SERVICE)
        params = [self._object(o, after) for o in self._late if o["kind"] == "GatewayParameters"]
        routing = []
        for obj in self._late:
            if obj["kind"] not in ("GatewayParameters", "HTTPRoute"):
                made = self._object(obj, after + params if obj["kind"] == "Gateway" else after)
                if obj["kind"] in ROUTING_KINDS:
                    routing.append(made)
        # the routes last, in the order that keeps every request answered while a running gateway moves to the
        # passes (fleetform/gateway.py ModelFallback): the second pass's own routes once the Gateway has its listeners
        # and the Backends exist, then the way in, which sends requests to them, then the model routes, which leave
        # the way in for the second pass's listener (until then they match on every listener, so a request re-routed
        # on the way in still finds its model). Pulumi writes a resource after those it depends on (create, update
        # and delete alike), but waits for no route's Accepted status, and kgateway watches routes and Backends
        # apart: the order narrows the windows between these states rather than proving kgateway never sees one
        # object before another.
        stages = _route_stages(self._gateway)
        done = []
        for stage in range(len(stages) + 1):
            made = [self._object(o, after + routing + done) for o in self._late
                    if o["kind"] == "HTTPRoute" and _stage(stages, o["metadata"]["name"]) == stage]
            done = done + made


ROUTING_KINDS = frozenset({"Gateway", "Backend", "DirectResponse", "GatewayExtension", "TrafficPolicy",
                           "BackendConfigPolicy", "InferencePool"})
"""What a gateway's routes name or need translated with them; a Deployment's rollout does not hold a route back."""


def _route_stages(gateway) -> tuple[frozenset[str], ...]:
    """The HTTPRoutes applied before the rest, in order: the second pass's unknown-model answer, then the way in
    (the catch-all and the semantic router's way in); every other route (the models', the semantic router's own
    listener's) after them."""
    if gateway is None or gateway.fallback is None:
        return ()
    way_in = {gateway.fallback.route} | ({gateway.semantic_router.way_in} if gateway.semantic_router else set())
    return frozenset({gateway.fallback.unknown_route}), frozenset(way_in)


def _stage(stages: tuple[frozenset[str], ...], name: str) -> int:
    return next((i for i, names in enumerate(stages) if name in names), len(stages))
