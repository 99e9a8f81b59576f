"""The offline resource plan: the real Pulumi program of providers/aws run under Pulumi's mocks,
recording every resource it registers as {type, name, parent, inputs}.

No Pulumi CLI, provider plugin or credential is needed. The mocks answer each resource with its
inputs plus the computed outputs later resources depend on (id, arn, name, ...), so no dependency
edge vanishes. The record is deterministic: sorted, and inputs normalized (numbers that are whole
become ints, secrets and unknowns get stable placeholders).
"""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager
from typing import Any

from .model import Blueprint

_LOCK = threading.Lock()  # the Pulumi runtime settings are process-global


SECRET_SIG = ("4dabf18193072939515e22adb298388d", "1b47061264138c4ac30d75fd1eb44270")
"""Pulumi's wire form of a secret value ({special signature key: secret signature, "value": ...},
pulumi.runtime.rpc _special_sig_key and _special_secret_sig)."""
SECRET_PLACEHOLDER = "[secret]"


def _normalize(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict) and value.get(SECRET_SIG[0]) == SECRET_SIG[1]:
        return SECRET_PLACEHOLDER  # a Pulumi secret: its value never reaches the record
    if isinstance(value, dict):
        return {k: _normalize(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [_normalize(v) for v in value]
    return value


def _quiet_loop_teardown() -> None:
    """Pulumi's mock monitor opens an asyncio loop per worker thread and never closes them; when the
    interpreter exits, collecting one can fail on its already-closed self-pipe. That is noise at
    exit, not a problem of the plan: keep it out of the user's terminal."""
    default = sys.unraisablehook

    def hook(unraisable):
        if isinstance(unraisable.exc_value, ValueError) and "Invalid file descriptor" in str(unraisable.exc_value):
            return
        default(unraisable)

    sys.unraisablehook = hook


MOCK_AMI = "ami-0123456789abcdef0"
MOCK_SECRET = "mock-secret-value"
"""What the mocks give each Pulumi secret config value the program reads (the Kubernetes Secrets of the
models): the record shows it only as the secret placeholder, never as this text."""
MOCK_DEPLOYER_CIDR = "203.0.113.10/32"
"""The mocks' stand-in for the public address `pulumi up` runs from (fleetform/pulumi_program.py looks the real one
up): an address of TEST-NET-3, which RFC 5737 reserves for documentation."""


def computed(type_: str, name: str, bp: Blueprint) -> dict[str, Any]:
    """Outputs AWS computes that the program reads (the mocks' stand-ins): without them an Output the
    user data is rendered from would stay unknown and the record would miss it."""
    if type_ == "aws:ec2/launchTemplate:LaunchTemplate":  # IAM policies name it by its EC2 ARN
        return {"arn": f"arn:aws:ec2:{bp.region}:123456789012:launch-template/{name}-id"}
    if type_ == "aws:ec2/networkInterface:NetworkInterface":
        return {"privateIp": "10.0.0.10"}
    if type_ == "aws:route53/zone:Zone":  # the controller's policy and the environment file name its id
        return {"zoneId": f"{name}-zone-id"}
    if type_ == "aws:rds/instance:Instance":  # the controller's user data and policy name them
        return {"address": f"{name}.abcdefghijkl.{bp.region}.rds.amazonaws.com",
                "masterUserSecrets": [{"secretArn": f"arn:aws:secretsmanager:{bp.region}:123456789012:secret:"
                                                    f"rds!db-{name}-id-AbCdEf", "secretStatus": "active"}]}
    if type_ == "aws:eks/nodeGroup:NodeGroup":  # the Auto Scaling group EKS makes: a pool's scheduled actions name it
        return {"resources": [{"autoscalingGroups": [{"name": f"eks-{name}-asg"}], "remoteAccessSecurityGroupId": ""}]}
    if type_ == "aws:fsx/lustreFileSystem:LustreFileSystem":
        return {"dnsName": f"{name}-id.fsx.{bp.region}.amazonaws.com", "mountName": "abcdefgh"}
    return {}


def invoke(token: str, args: dict, bp: Blueprint) -> dict[str, Any]:
    """What the program's data-source calls answer under the mocks, with the fields it reads."""
    if token == "aws:ssm/getParameter:getParameter":
        return {"name": args["name"], "id": args["name"], "type": "String", "value": MOCK_AMI,
                "insecureValue": MOCK_AMI, "version": 1, "arn": f"arn:aws:ssm:{bp.region}::parameter{args['name']}"}
    if token == "aws:ec2/getVpc:getVpc":
        return {"id": args.get("id"), "cidrBlock": "10.0.0.0/16"}
    if token == "aws:ec2/getSubnet:getSubnet":
        return {"id": args.get("id"), "availabilityZone": f"{bp.region}a", "vpcId": "vpc-mock"}
    return {}


MOCK_ARN = "arn:aws:mock:::{kind}/{short}"
"""The ARN the mocks give a resource: its type's last word, lower case, and its short name."""


def mock_short(name: str) -> str:
    """The short name the mocks make a resource's id (`<short>-id`), name, bucket (`<short>-bucket`)
    and ARN from; fleetform/changes.py reads the same identifiers back for a renamed resource."""
    return name.replace("/", "-")


def record(bp: Blueprint, files: dict[str, bytes]) -> list[dict]:
    """Run the Pulumi program for a blueprint under mocks; return its resources, sorted."""
    with _no_collector():  # also while the SDK is imported
        return _record(bp, files)


def _record(bp: Blueprint, files: dict[str, bytes]) -> list[dict]:
    import pulumi
    from pulumi.runtime import mocks as pulumi_mocks

    from .providers.aws.inference import secret_config_keys
    from .providers.aws.program import build

    registered: list[dict] = []
    names: dict[str, str] = {}
    keys: dict[str, str] = {}
    stacks: set[str] = set()

    class Monitor(pulumi_mocks.MockMonitor):
        def RegisterResource(self, request):  # noqa: N802 (Pulumi's name)
            response = super().RegisterResource(request)
            names[response.urn] = request.name
            keys[response.urn] = f"{request.type}::{request.name}"  # names repeat across types
            if request.type == "pulumi:pulumi:Stack":
                stacks.add(response.urn)
            else:
                inputs = pulumi.runtime.rpc.deserialize_properties(request.object)
                parent = None if request.parent in stacks else names.get(request.parent)
                entry = {"type": request.type, "name": request.name, "parent": parent, "inputs": _normalize(inputs)}
                aliases = sorted(a.spec.name for a in request.aliases if a.HasField("spec") and a.spec.name)
                if aliases:  # a renamed fleet's component keeps its old name; children inherit the alias
                    entry["aliases"] = aliases
                # which resources each input was computed from: the diff follows these edges when a
                # replaced resource's id changes in everything that reads it
                deps = {key: sorted({keys[u] for u in dep.urns if u in keys})
                        for key, dep in request.propertyDependencies.items()}
                deps = {key: value for key, value in sorted(deps.items()) if value}
                if deps:
                    entry["deps"] = deps
                options = {"ignoreChanges": sorted(request.ignoreChanges),
                           "replaceOnChanges": sorted(request.replaceOnChanges),
                           "deleteBeforeReplace": request.deleteBeforeReplace,
                           # a CRD `pulumi up` never deletes (providers/aws/gateway.py)
                           "retainOnDelete": request.retainOnDelete}
                options = {key: value for key, value in options.items() if value}
                if options:
                    entry["options"] = options
                # every dependency: explicit depends_on and the resources its inputs come from
                depends = sorted({names[u] for u in request.dependencies if u in names and u not in stacks})
                if depends:
                    entry["depends_on"] = depends
                registered.append(entry)
            return response

    class Mocks(pulumi.runtime.Mocks):
        def new_resource(self, args: pulumi.runtime.MockResourceArgs):
            outputs = dict(args.inputs)
            short = mock_short(args.name)
            for key, value in computed(args.typ, short, bp).items():
                outputs.setdefault(key, value)
            outputs.setdefault("name", short)
            outputs.setdefault("arn", MOCK_ARN.format(kind=args.typ.split(":")[-1].lower(), short=short))
            outputs.setdefault("bucket", f"{short}-bucket" if "bucketPrefix" in args.inputs else short)
            outputs.setdefault("latestVersion", 1)
            if args.typ == "aws:eks/cluster:Cluster":  # what the Kubernetes provider's kubeconfig is built from
                outputs.setdefault("endpoint", f"https://{short}.eks.mock")
                outputs.setdefault("certificateAuthority", {"data": "bW9jaw=="})
                # the security group EKS makes for the cluster and gives its managed nodes
                outputs["vpcConfig"] = {**(outputs.get("vpcConfig") or {}), "clusterSecurityGroupId": f"{short}-sg"}
            return [f"{short}-id", outputs]

        def call(self, args: pulumi.runtime.MockCallArgs):
            return invoke(args.token, dict(args.args), bp)

    _quiet_loop_teardown()
    with _LOCK, _no_stack_traces(), _own_executor():
        mocks = Mocks()
        pulumi.runtime.set_mocks(mocks, project="fleetform", stack="plan", preview=False, monitor=Monitor(mocks))
        secrets = secret_config_keys(bp)
        pulumi.runtime.set_all_config({key: MOCK_SECRET for key in secrets}, secrets)

        @pulumi.runtime.test
        def program():
            build(bp, files, MOCK_DEPLOYER_CIDR)

        try:
            program()
        finally:
            pulumi.runtime.set_all_config({})
    return sorted(registered, key=lambda r: (r["type"], r["name"]))


@contextmanager
def _no_collector():
    """The cyclic garbage collector off while the program runs: the SDK's modules, loaded as the program
    first uses them, and its futures and tasks are hundreds of thousands of objects that each collection
    walks again. Off, the reference plan's run takes 0.8 s less CPU (2.9 instead of 3.7 s) and the same
    memory; 1,000 models 35 instead of 52 s, at 600 instead of 550 MiB peak (benchmarks/README.md).
    What the run leaves in cycles is collected once the collector is back on."""
    import gc

    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


@contextmanager
def _no_stack_traces():
    """Pulumi's SDK takes the Python stack of every resource it registers, each frame made a file URI
    (pulumi.runtime.resource._get_stack_trace), for the engine to show where a resource was declared:
    a fifth of the program's run under the mocks, which never read it, nor does the record. While the
    program runs here the SDK is given an empty trace (what it sends when it finds no caller); a real
    `pulumi up` (stacks/__main__.py) never comes here."""
    from pulumi.runtime import resource

    real = getattr(resource, "_get_stack_trace", None)
    trace = getattr(getattr(resource, "source_pb2", None), "StackTrace", None)
    if real is None or trace is None:  # another SDK: leave it as it is
        yield
        return
    resource._get_stack_trace = lambda *_args, **_kwargs: trace()  # whatever a later SDK passes it
    try:
        yield
    finally:
        resource._get_stack_trace = real


@contextmanager
def _own_executor():
    """The SDK sends each call to the mock monitor through the event loop's default executor, whose
    worker threads would outlive the plan and keep the `fleetform` script from ending without the
    interpreter's teardown (fleetform.cli.run). The program runs with an executor of its own, shut
    down (its threads joined) when it is done; the SDK finds the loop as pulumi.runtime.sync_await
    does."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    try:
        loop = asyncio.get_event_loop()
    except RuntimeError:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
    previous = getattr(loop, "_default_executor", None)
    executor = ThreadPoolExecutor(thread_name_prefix="fleetform-plan")
    loop.set_default_executor(executor)
    try:
        yield
    finally:
        executor.shutdown(wait=True)
        # the loop outlives the plan (a second plan, or another Pulumi program, in the same process): a shut-down
        # default executor would refuse its every call ("cannot schedule new futures after shutdown"); the loop
        # gets back what it had (None: it makes a fresh one when next asked)
        loop._default_executor = previous
