"""What `fleetform init` writes: a commented starter blueprint and the files of a blueprint repository.

The choices (instance types, model, sizes) are made here, in Python, from the catalog; the text of each
file is then laid out from those values alone (fleetform/commands/init.py writes them, all or none).
A starter validates with no error and no warning for every kind and every GPU of the catalog
(tests/test_init.py checks each).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from difflib import get_close_matches
from importlib import resources

from . import __version__
from .catalog import Catalog, InstanceType

KINDS = ("training", "inference", "both")
STACK = "dev"
SCHEMA_FILE = "fleetform-v1.schema.json"
NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
"""metadata.name: a DNS-1123 label (the schema's dnsLabel) of at most 40 characters (metadata.name's maxLength)."""

SMALL_GPU_GIB = 40
"""GPUs below this memory (L4, A10G: 22.4 GiB) serve the 3B model: the 7B one in bf16 (15.2 GB of weights)
leaves an L4 less than kv-cache-room's 20% of usable memory for the KV cache."""

MODELS = {
    # parameters: the Hugging Face model cards' "Number of Parameters": 3.09B as quoted on
    # fitmygpu.com/models/qwen-2.5-3b (read 2026-11-24); 7.61B for the 7B, the figure blueprints/inference-l4.yaml
    # already uses (7.6) for its FP8 copy. The cards themselves were not reachable from here. Both are ungated
    # (providers/hf-gated-models.tsv lists no Qwen/ prefix) and stored in bf16.
    "large": ("qwen-7b", "Qwen/Qwen2.5-7B-Instruct", 7.6),
    "small": ("qwen-3b", "Qwen/Qwen2.5-3B-Instruct", 3.1),
}
REVISIONS = {
    # the Hub commit each replica loads (hf-revision-unpinned): the snapshot folder the Hub's client names in a
    # Hugging Face cache, models--Qwen--<name>/snapshots/<commit>, as public scripts quote it for these repositories
    "Qwen/Qwen2.5-7B-Instruct": "a09a35458c702b33eeacc393d103063234e8bc28",
    "Qwen/Qwen2.5-3B-Instruct": "aa8e72537993ba99e69dfaafa59ed015b17504d1",
}
VLLM_IMAGE = "vllm/vllm-openai:v0.11.0"
"""The vLLM line fleetform pins its flag table to (providers/vllm-serve-flags.tsv)."""

CONTROLLER = "m7i.xlarge"
"""The Slurm controller of the starter's training fleet: 4 vCPUs, 16 GiB, no GPU."""

COMMENT_COLUMN = 36
"""Where the starter's end-of-line comments start, as in blueprints/reference.yaml."""


def _c(code: str, comment: str) -> str:
    """A line of YAML with its comment aligned at COMMENT_COLUMN (or one space after longer code)."""
    return code + " " * max(1, COMMENT_COLUMN - len(code)) + comment


class InitError(ValueError):
    """A bad argument of `fleetform init` (a usage error, exit 2)."""


def regions() -> dict[str, str]:
    """AWS regions of the commercial partition with their names (providers/aws/regions.json, from botocore)."""
    text = resources.files("fleetform.providers").joinpath("aws/regions.json").read_text(encoding="utf-8")
    return json.loads(text)["partitions"]["aws"]


def check_region(region: str) -> str:
    known = regions()
    if region in known:
        return region
    close = get_close_matches(region, list(known), n=2, cutoff=0.6)
    hint = f"did you mean {' or '.join(map(repr, close))}?" if close else f"the regions are {', '.join(known)}"
    raise InitError(f"unknown AWS region {region!r}; {hint}")


def check_name(name: str) -> str:
    if len(name) > 40 or not NAME.match(name):
        raise InitError(f"--name {name!r} is not a blueprint name: lowercase letters, digits and '-', starting with a "
                        "letter, not ending with '-', at most 40 characters (e.g. 'llm-fleets')")
    return name


def pick_instances(catalog: Catalog, gpu: str) -> tuple[InstanceType, InstanceType]:
    """(training, inference) instance types for --gpu: an instance type names itself for both; a GPU name
    (h100, H100-80GB, l4) picks, among the types with that GPU, for training the most GPUs and EFA
    interfaces per node among those with an on-demand price (then the lowest price), and for inference the
    fewest GPUs per node (then the lowest price): the starter's one model needs one GPU, and the cluster rules
    (cluster-admission) admit its pod on the smallest such node (tests/test_init.py validates each)."""
    chosen = catalog.instance(gpu)
    if chosen is not None:
        return chosen, chosen
    gpus = {g.name for g in catalog.find_gpu(gpu)}
    if not gpus:
        names = sorted({g.family.lower() for g in catalog.gpus.values()} | set(catalog.instances))
        close = get_close_matches(gpu.lower(), names, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}?" if close else \
            f"give a GPU ({', '.join(sorted({g.family.lower() for g in catalog.gpus.values()}))}) or an instance type " \
            "of `fleetform catalog`"
        raise InitError(f"unknown GPU or instance type {gpu!r}; {hint}")
    candidates = [i for i in catalog.instances.values() if i.gpu.name in gpus]

    def price(i: InstanceType) -> float:
        return float("inf") if i.price_usd_hr is None else i.price_usd_hr

    training = min(candidates, key=lambda i: (-i.gpu_count, i.price_usd_hr is None, -i.max_efa, price(i), i.name))
    inference = min(candidates, key=lambda i: (i.gpu_count, price(i), i.name))
    return training, inference


@dataclass(frozen=True)
class Starter:
    """Every value a starter blueprint prints."""

    name: str
    kind: str
    region: str
    zone: str
    training: InstanceType | None
    inference: InstanceType | None

    @property
    def model(self) -> tuple[str, str, float]:
        small = self.inference is not None and self.inference.gpu.memory_mib / 1024 < SMALL_GPU_GIB
        return MODELS["small" if small else "large"]


def starter(catalog: Catalog, kind: str, region: str, gpu: str, name: str, zone: str | None = None) -> Starter:
    if kind not in KINDS:
        raise InitError(f"unknown kind {kind!r}; one of {', '.join(KINDS)}")
    region = check_region(region)
    zone = zone or f"{region}a"
    if not zone.startswith(region) or not re.fullmatch(r"[a-z]", zone[len(region):]):
        raise InitError(f"--zone {zone!r} is not an availability zone of {region} (e.g. {region}a)")
    training, inference = pick_instances(catalog, gpu)
    return Starter(check_name(name), kind, region, zone,
                   training if kind in ("training", "both") else None,
                   inference if kind in ("inference", "both") else None)


def blueprint_text(s: Starter) -> str:
    lines = [
        f"# yaml-language-server: $schema=./{SCHEMA_FILE}",
        f"# A starter blueprint written by `fleetform init` {__version__}. Check it with `fleetform validate "
        f"{s.name}.yaml`;",
        "# `fleetform explain PATH` (e.g. fleets.models.autoscale) describes any field, `fleetform plan` prints",
        "# the cost and the AWS resources, and `pulumi up` in this folder builds it (README.md).",
        "apiVersion: fleetform/v1",
        "kind: Blueprint",
        "metadata:",
        _c(f"  name: {s.name}", "# names the AWS resources, tags and rendered/<name>/"),
        _c("  version: 0.1.0", "# semver: raise it with every change you merge"),
        f"  description: {_description(s)}",
        "",
        "provider:",
        "  cloud: aws",
        f"  region: {s.region}",
        _c(f"  availability_zone: {s.zone}", "# one zone (EFA, cluster placement); zone letters differ between"),
        _c("", "# accounts: check the instance types are offered in yours:"),
        _c("", f"# {offerings_command(s)}"),
        "  network:",
        _c("    cidr: 10.40.0.0/16", "# a new VPC; or vpc_id + subnet_id of an existing one"),
        _c("    ssh_ingress_cidrs: []", "# no SSH from anywhere: nodes are reached through SSM"),
    ]
    if s.training is not None:
        lines += [
            "",
            "storage:",
            _c("  - name: checkpoints", "# an encrypted S3 bucket, private"),
            "    type: s3",
            "    versioning: true",
            "    noncurrent_expiry_days: 30",
        ]
    lines += ["", "fleets:"]
    if s.training is not None:
        lines += _training(s.training)
    if s.inference is not None:
        if s.training is not None:
            lines.append("")
        lines += _inference(s, s.inference)
    lines += _floor_waiver(s.training)
    return "\n".join(lines) + "\n"


def _floor_waiver(i: InstanceType | None) -> list[str]:
    """A starter whose training type has no published 2-node nccl-tests run (providers/aws/nccl-allreduce.json)
    would warn acceptance-floor on its first validate; it waives it, saying how to earn a floor instead."""
    from .acceptance import FLOOR_FRACTION, published_runs

    run = published_runs().get(i.name) if i is not None else None
    if i is None or training_nodes(i) < 2 or (run is not None and run.nodes == 2):
        return []
    return ["", "waivers:", "  - rule: acceptance-floor",
            f"    reason: No published nccl-tests all-reduce result for {i.name}, so the acceptance job (bin/acceptance.sbatch)",
            "      reports the bus bandwidth without failing a slow network. After its first run on healthy nodes, set",
            f"      acceptance.nccl_min_busbw_gbps to {FLOOR_FRACTION:g} x its '# Avg bus bandwidth' and remove this waiver."]


def instance_types(s: Starter) -> list[str]:
    """Every instance type the starter launches, in the order the blueprint names them."""
    names = []
    if s.training is not None:
        names += [s.training.name, CONTROLLER]
    if s.inference is not None:
        names.append(s.inference.name)
    return list(dict.fromkeys(names))


def offerings_command(s: Starter) -> str:
    """The AWS CLI call that lists the zones of s.region where the starter's instance types are offered. The zone
    is a guess: in AWS's older regions each account maps zone letters to places of its own, some accounts
    lack a region's `a` zone, and fleetform has no data on which zone offers which type (its catalog prices
    us-east-1 only). AWS: "Regions with independently mapped Availability Zones",
    https://docs.aws.amazon.com/global-infrastructure/latest/regions/az-ids.html (read 2026-11-24)."""
    return (f"aws ec2 describe-instance-type-offerings --region {s.region} --location-type availability-zone "
            f"--filters Name=instance-type,Values={','.join(instance_types(s))} --output text")


def _description(s: Starter) -> str:
    parts = []
    if s.training is not None:
        parts.append(f"train on {training_nodes(s.training)} x {s.training.name}")
    if s.inference is not None:
        parts.append(f"serve {s.model[1]} on {s.inference.name}")
    text = " and ".join(parts)
    return text[0].upper() + text[1:] + "."


def training_nodes(i: InstanceType) -> int:
    """2 nodes over EFA; 1 on a type without EFA, whose nodes would all-reduce over TCP (efa-multinode)."""
    return 2 if i.has_efa else 1


def _training(i: InstanceType) -> list[str]:
    gpus = f"{i.gpu_count} x {i.gpu.name}"
    efa = f", {i.max_efa} EFA" if i.has_efa else ""
    if i.has_efa:
        size = [_c("    nodes: 2", "# a fixed count, or {min: N, max: M}: Slurm powers nodes up on demand"),
                "    capacity:",
                _c("      type: on-demand", "# on-demand | spot | reservation | capacity-block"),
                _c("    placement: cluster", "# nodes close together: a cluster placement group")]
    else:
        size = [_c("    nodes: 1", f"# {i.name} has no EFA: more nodes would all-reduce over TCP"),
                "    capacity:",
                _c("      type: on-demand", "# on-demand | spot | reservation | capacity-block"),
                _c("    placement: none", "# one node: no placement group")]
    return [
        "  - name: train",
        "    role: training",
        _c(f"    instance_type: {i.name}", f"# {gpus}{efa} (`fleetform catalog`)"),
        *size,
        "    storage: [checkpoints]",
        "    scheduler:",
        "      type: slurm",
        "      controller:",
        f"        instance_type: {CONTROLLER}",
        "      partitions:",
        "        - name: gpu",
        "          default: true",
        _c("          max_time: 2-00:00:00", "# days-hours:minutes:seconds"),
    ]


def _inference(s: Starter, i: InstanceType) -> list[str]:
    name, model, params = s.model
    return [
        "  - name: serve",
        "    role: inference",
        _c(f"    instance_type: {i.name}", f"# {i.gpu_count} x {i.gpu.name}"),
        _c("    nodes: {min: 1, max: 2}", "# the Cluster Autoscaler adds nodes for pending replicas"),
        "    capacity:",
        "      type: on-demand",
        "    scheduler:",
        _c("      type: kubernetes", "# one EKS cluster for all inference fleets"),
        _c(f'      version: "{_kubernetes_version()}"', "# the newest Kubernetes in EKS standard support"),
        "      namespace: serve",
        _c("      autoscaler: keda", "# keda | hpa"),
        "    models:",
        f"      - name: {name}",
        f"        image: {VLLM_IMAGE}",
        _c(f"        model: {model}", "# a Hugging Face id; ungated, so no hf_token_secret"),
        _c(f"        weights: {{revision: {REVISIONS[model]}}}", "# the Hub commit every replica loads"),
        f"        model_params_billion: {params:g}",
        "        precision: bf16",
        _c("        tensor_parallel: 1", "# GPUs per replica"),
        "        max_model_len: 8192",
        _c(f"        replicas: {{min: 1, max: {2 * i.gpu_count}}}", "# every GPU of the fleet's 2 nodes at most"),
        "        autoscale:",
        _c("          metric: queue_depth", "# vLLM requests waiting, per replica"),
        "          target_per_replica: 5",
    ]


def _kubernetes_version() -> str:
    """What the eks-version rules accept without a warning today: the newest version in EKS standard support
    that fleetform renders for (the rules are imported whole first, so they register in their order)."""
    from .rules import checks  # noqa: F401
    from .rules.fleets import suggested_k8s_version

    return suggested_k8s_version()


def stack_config_text(s: Starter) -> str:
    lines = [
        f"# The stack `{STACK}`: `pulumi stack init {STACK}` uses this file. Config the program reads:",
        "#   fleetform:blueprint       the blueprint, relative to this folder",
        "#   aws:region                must be the blueprint's provider.region (the program stops otherwise)",
        "#   fleetform:deployer-cidr   optional: the address the EKS API answers (default: this run's public /32)",
        "#   fleetform:secret-<name>   each Kubernetes Secret the models read: pulumi config set --secret ...",
        "config:",
        f"  aws:region: {s.region}",
        f"  fleetform:blueprint: {s.name}.yaml",
    ]
    return "\n".join(lines) + "\n"


def project_text(s: Starter) -> str:
    return "\n".join([
        f"name: {s.name}",
        f"description: GPU fleets on AWS from the fleetform blueprint {s.name}.yaml (fleetform:blueprint in the "
        "stack config).",
        "runtime:",
        "  name: python",
        "  options:",
        "    toolchain: pip",
        _c("    virtualenv: venv", "# Pulumi makes it from requirements.txt on the first run"),
        "",
    ])


MAIN_TEXT = '''"""The Pulumi program: fleetform's own, shipped in the fleetform package (fleetform/pulumi_program.py)."""

from pathlib import Path

from fleetform.pulumi_program import main

main(Path(__file__).parent)  # a relative fleetform:blueprint is read from this folder
'''


def _direct_url() -> str | None:
    """The direct_url.json of the installed fleetform (PEP 610: where pip installed it from, if not an index)."""
    from importlib import metadata

    try:
        return metadata.distribution("fleetform").read_text("direct_url.json")
    except metadata.PackageNotFoundError:
        return None


def requirement() -> tuple[str, bool]:
    """(the requirement that installs this fleetform with the aws extra, whether it names a source another
    machine reaches). fleetform is installed from its git repository (README, Install), not from a package
    index: `fleetform[aws]==VERSION` alone fails pip's "No matching distribution" wherever no index of the
    user's has it, so the first `pulumi preview` could not make its virtualenv. pip records the source it
    installed from (PEP 610, direct_url.json): a git URL at its commit, or an archive's http(s) URL, is
    written as it is; a local folder or file is not portable, and the version is written, with a warning."""
    text = _direct_url()
    if text:
        try:
            data = json.loads(text)
        except ValueError:
            data = {}
        url = str(data.get("url", ""))
        vcs = data.get("vcs_info")
        if isinstance(vcs, dict) and vcs.get("vcs") and vcs.get("commit_id") and not url.startswith("file:"):
            return f"fleetform[aws] @ {vcs['vcs']}+{url}@{vcs['commit_id']}", True
        if "archive_info" in data and url.startswith(("https://", "http://")):
            return f"fleetform[aws] @ {url}", True
    return f"fleetform[aws]=={__version__}", False


def requirements_text() -> str:
    line, portable = requirement()
    where = ("# fleetform from where this one was installed, at its commit." if portable else
             "# Where fleetform is not on your package index, name its source instead, as fleetform's README\n"
             "# (Install) does:\n"
             f"# fleetform[aws] @ git+https://github.com/<your-org>/fleetform@v{__version__}")
    return ("# The stack's virtualenv (venv/): fleetform at the version that wrote this repository, with the Pulumi\n"
            "# SDKs it builds AWS resources with. Raise it together with the blueprint's fleetform.\n"
            f"{where}\n{line}\n")


def readme_text(s: Starter) -> str:
    bp = f"{s.name}.yaml"

    def block(rows: list[tuple[str, str]]) -> str:
        width = max(len(command) for command, comment in rows if comment) + 2
        return "\n".join(f"{command:<{width}}# {comment}" if comment else command for command, comment in rows)

    local = block([
        ("python3 -m venv .venv && .venv/bin/pip install -r requirements.txt", ""),
        (f".venv/bin/fleetform validate {bp}", "every error and warning, at its line"),
        (".venv/bin/fleetform explain fleets.models", "what a field means: type, default, values, example"),
        (f".venv/bin/fleetform plan {bp}", "sizing, cost and the AWS resources, offline"),
        (f".venv/bin/fleetform render {bp}", f"the Slurm, NCCL and Kubernetes files, into rendered/{s.name}/"),
    ])
    deploy = block([
        ("pulumi login", "or: pulumi login --local"),
        (f"pulumi stack init {STACK}", f"its config is Pulumi.{STACK}.yaml"),
        ("pulumi preview", "Pulumi makes venv/ from requirements.txt on the first run"),
        ("pulumi up", ""),
    ])
    return f"""# {s.name}

GPU fleets described by the fleetform blueprint `{bp}`, built on AWS with Pulumi.

```sh
{local}
```

To build it (the Pulumi CLI and AWS credentials):

```sh
{deploy}
```

Files: `{bp}` (the blueprint), `{SCHEMA_FILE}` (its JSON Schema: editors with the YAML language server
check the blueprint as you type), `Pulumi.yaml` and `__main__.py` (the project: fleetform's own program),
`Pulumi.{STACK}.yaml` (the stack's config), `requirements.txt` (fleetform pinned). Add `venv/` and
`rendered/` to `.gitignore`, or commit `rendered/` and check it in CI with `fleetform render --check`.
A model that reads a Kubernetes Secret (`hf_token_secret`) needs its value first:
`pulumi config set --secret fleetform:secret-<Secret name> <value>`.
"""


def schema_text() -> str:
    """The schema file as fleetform ships it (fleetform.schema.schema_text, without importing jsonschema)."""
    return resources.files("fleetform.blueprints").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")


def files(s: Starter) -> dict[str, str]:
    """Every file `fleetform init` writes, by name, in the order it lists them."""
    return {
        f"{s.name}.yaml": blueprint_text(s),
        SCHEMA_FILE: schema_text(),
        "Pulumi.yaml": project_text(s),
        f"Pulumi.{STACK}.yaml": stack_config_text(s),
        "__main__.py": MAIN_TEXT,
        "requirements.txt": requirements_text(),
        "README.md": readme_text(s),
    }
