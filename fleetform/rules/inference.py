"""Rules over inference fleets: tensor parallelism, memory, autoscaling and GPU sharing."""

from __future__ import annotations

import json
import math
import re
from functools import lru_cache
from importlib import resources

from ..k8s import OWNED_FLAGS
from ..lora import HUB_REPO
from ..model import Blueprint, Model
from ..records import frozen
from . import Reporter, did_you_mean, rule

KV_CACHE_MIN_SHARE = 0.2
"""Share of the memory vLLM may use that should be left for the KV cache after the weights."""

K8S_MIN = (1, 25)
K8S_MAX = (1, 37)
"""Kubernetes versions fleetform renders manifests for and validates them against."""


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _inference(bp: Blueprint):
    return [f for f in bp.fleets if not f.training]


@rule("tensor-parallel", "error", "tensor_parallel divides the GPUs of a node (larger: lws-tp-within-node); shared GPUs "
      "take tensor_parallel 1")
def tensor_parallel(bp: Blueprint, report: Reporter) -> None:
    for fleet in _inference(bp):
        if fleet.shape is None:
            continue
        gpus = fleet.shape.gpu_count
        for model in fleet.models:
            tp = model.tensor_parallel
            path = model.path + ("tensor_parallel",)
            if fleet.gpu_sharing.strategy != "none" and model.gpus != 1:
                report(path if tp != 1 else model.path + ("pipeline_parallel",),
                       f"tensor_parallel {tp} x pipeline_parallel {model.pipeline_parallel} on "
                       f"{fleet.gpu_sharing.strategy} devices" if model.pipeline_parallel != 1 else
                       f"tensor_parallel {tp} on {fleet.gpu_sharing.strategy} devices",
                       "vLLM cannot split a model across shared GPU slices; use tensor_parallel: 1 "
                       "or a fleet without gpu_sharing")
            elif tp > gpus:
                continue  # a replica spanning nodes: lws-tp-within-node (fleetform/rules/lws.py)
            elif gpus % tp:
                fits = [d for d in range(1, gpus + 1) if gpus % d == 0]
                report(path, f"tensor_parallel {tp} does not divide the {gpus} GPUs of a node",
                       f"use one of {', '.join(map(str, fits))}")


def _usable_gb(model: Model, device_gb: float) -> float:
    return model.gpus * device_gb * model.gpu_memory_utilization  # the weights split across TP x PP


SUGGESTED_INSTANCES = 4
"""Instance types a hint names at most, cheapest first."""


def fit_options(model: Model, fleet, tokens: int | None) -> list[str]:
    """What holds the model when its GPUs do not: a larger tensor_parallel where the node has the GPUs
    for it, else (AWS) the catalog's instance types whose GPUs hold it on one node, with the
    tensor_parallel to use there; never a tensor_parallel the node does not have."""
    from ..catalog import load_catalog
    from ..fit import fits, instances_that_fit

    options = []
    devices = fleet.devices()
    if devices is not None and fleet.gpu_sharing.strategy == "none":
        per_node, device_gb, _ = devices
        larger = next((d for d in range(model.tensor_parallel + 1, per_node + 1)
                       if per_node % d == 0 and fits(model, device_gb, d, tokens)), None)
        if larger is not None:
            options.append(f"raise tensor_parallel to {larger} (the node has {per_node} GPUs)")
    if fleet.instance is not None:
        found = [(i, tp) for i, tp in instances_that_fit(model, load_catalog().instances.values(), tokens)
                 if i.name != fleet.instance.name]
        if found:
            shown = ", ".join(f"{i.name} ({i.gpu_count} x {i.gpu.name}, tensor_parallel {tp}"
                              + (f", ${i.price_usd_hr:.2f}/h)" if i.price_usd_hr is not None else ")")
                              for i, tp in found[:SUGGESTED_INSTANCES])
            options.append(f"use an instance type whose GPUs hold it: {shown}; `fleetform catalog` lists them all")
        else:
            options.append("no instance type in fleetform's catalog holds it on one node")
    elif fleet.shape is not None:
        options.append("use GPUs with more memory")
    return options


@rule("model-fits", "error", "a model's weights fit the memory of its tensor_parallel GPUs, while loading too")
def model_fits(bp: Blueprint, report: Reporter) -> None:
    for fleet in _inference(bp):
        devices = fleet.devices()
        if devices is None:
            continue
        _, device_gb, device = devices
        for model in fleet.models:
            usable = _usable_gb(model, device_gb)
            where = (f"the {usable:.1f} GB vLLM may use on {model.gpus} x {device} "
                     f"({device_gb:.1f} GB x {model.gpu_memory_utilization:g})")
            if model.weights_gb > usable:
                options = fit_options(model, fleet, model.context_tokens)
                if model.precision not in ("int4",):
                    options.append("serve a quantized precision")
                report(model.path + ("tensor_parallel",),
                       f"{model.model_params_billion:g}B parameters in {model.precision} take {model.weights_gb:.1f} GB, "
                       f"more than {where}", "; or ".join(options))
            elif model.load_gb > usable:
                options = ["serve an fp8 checkpoint (checkpoint_precision: fp8)"] + fit_options(
                    model, fleet, model.context_tokens)
                report(model.path + ("tensor_parallel",),
                       f"vLLM loads the {model.checkpoint} checkpoint whole before quantizing it to fp8: "
                       f"{model.load_gb:.1f} GB while loading, more than {where}", "; or ".join(options))


QUANTIZED = ("fp8", "int8", "int4")
QUANTIZED_NAME = r"fp8|int8|int4|awq|gptq|w8a8|w8a16|w4a16|nvfp4|mxfp4|quantized|bnb|4bit|8bit"
"""Words that quantized checkpoints carry in their Hub ids (RedHatAI/...-FP8-dynamic, ...-AWQ, ...-GPTQ-Int4),
case-insensitively; compiled (0.15 ms) only for a model that needs it, not at every validate's import."""


@rule("model-precision", "error", "vLLM can serve the precision from the checkpoint's precision")
def model_precision(bp: Blueprint, report: Reporter) -> None:
    for fleet in _inference(bp):
        for model in fleet.models:
            served, stored = model.precision, model.checkpoint
            if served == stored or model.quantize_on_load or (served not in QUANTIZED and stored not in QUANTIZED):
                continue
            path = model.path + ("checkpoint_precision",)
            if stored in QUANTIZED:
                report(path, f"a {stored} checkpoint cannot be served in {served}",
                       f"vLLM runs a quantized checkpoint in the precision it was quantized to; set precision: {stored}")
            else:
                report(path, f"vLLM 0.11 cannot quantize a {stored} checkpoint to {served} while loading",
                       f"serve a checkpoint quantized to {served} (AWQ, GPTQ, compressed-tensors) with "
                       f"checkpoint_precision: {served}, or precision: fp8")


@rule("checkpoint-precision", "warning", "a quantized precision says whether the checkpoint is already quantized")
def checkpoint_precision(bp: Blueprint, report: Reporter) -> None:
    for fleet in _inference(bp):
        for model in fleet.models:
            if model.precision in QUANTIZED and not model.checkpoint_precision \
                    and not re.search(QUANTIZED_NAME, model.model, re.IGNORECASE):
                report(model.path + ("precision",),
                       f"precision {model.precision} with no checkpoint_precision: '{model.model}' is taken for a "
                       f"{model.precision} checkpoint, but its name does not say it is quantized",
                       "if it is a bf16 checkpoint, say checkpoint_precision: bf16 (vLLM then quantizes it to fp8 "
                       "on load); if it is quantized, say checkpoint_precision: " + model.precision)


@lru_cache(maxsize=1)
def gated_prefixes() -> tuple[str, ...]:
    """Hub id prefixes of gated models (providers/hf-gated-models.tsv, with the source of each)."""
    text = resources.files("fleetform.providers").joinpath("hf-gated-models.tsv").read_text(encoding="utf-8")
    return tuple(line.split("\t", 1)[0] for line in text.splitlines()
                 if line and not line.startswith("#") and not line.startswith("prefix\t"))


@rule("hf-gated", "warning", "a gated Hugging Face model downloaded from the Hub has a token")
def hf_gated(bp: Blueprint, report: Reporter) -> None:
    for fleet in _inference(bp):
        for model in fleet.models:
            hub = model.weights is None or model.weights.source == "hub"
            prefix = next((p for p in gated_prefixes() if model.model.lower().startswith(p.lower())), None)
            if hub and prefix and not model.hf_token_secret:
                report(model.path + ("model",),
                       f"'{model.model}' is gated on the Hugging Face Hub ({prefix}*) and no hf_token_secret is given: "
                       "the download gets HTTP 401 and the pods crash-loop",
                       "add hf_token_secret: <Secret with key HF_TOKEN> of an account that accepted the license, "
                       "or load the weights from s3 or a volume")


HF_COMMIT = re.compile(r"[0-9a-f]{40}")
"""A Hub commit id: 40 lower-case hex digits (a branch or tag name is a pointer the repository can move)."""


@rule("hf-revision-unpinned", "warning", "weights and LoRA adapters from the Hugging Face Hub name the commit to load "
      "(weights.revision, an adapter's revision)")
def hf_revision_unpinned(bp: Blueprint, report: Reporter) -> None:
    """Without --revision vLLM loads the repository's `main` as it is when each replica starts (vLLM 0.11
    ModelConfig.revision, which --revision fills through vllm/engine/arg_utils.py: "The specific model version to use. It can be a branch
    name, a tag name, or a commit id. If unspecified, will use the default version."): replicas started a
    week apart may serve different weights under one pinned image, each downloading them through the NAT."""
    for fleet in _inference(bp):
        for model in fleet.models:
            weights = model.weights
            if weights is None or weights.source == "hub":
                revision = weights.revision if weights is not None else None
                _unpinned(report, revision, model.path + ("model",), weights.path + ("revision",) if weights else None,
                          f"'{model.model}' comes from the Hugging Face Hub", f"of '{model.model}'", "load different weights",
                          "set weights: {revision: <the 40-digit commit id>} (the model page's Files and versions, "
                          "History), or stream the weights from S3 (weights: {source: s3, uri: ...})")
            # LoRA adapters from the Hub (fleetform/lora.py FETCH_SCRIPT): the init container's snapshot_download
            # takes revision=None as the repository's `main` when each replica starts, the same drift
            for adapter in model.lora.adapters if model.lora is not None else ():
                if adapter.kind == "hub" and HUB_REPO.match(adapter.source):  # a malformed id is lora-source's
                    _unpinned(report, adapter.revision, adapter.path + ("source",), adapter.path + ("revision",),
                              f"adapter '{adapter.name}' comes from '{adapter.source}' on the Hugging Face Hub",
                              f"of adapter '{adapter.name}'", "serve different adapters under its name",
                              "set the adapter's revision to the 40-digit commit id (the repository's Files and "
                              "versions, History), or copy the adapter into an S3 folder of its own")


def _unpinned(report: Reporter, revision: str | None, path, revision_path, source: str, of: str, drift: str,
              hint: str) -> None:
    """hf-revision-unpinned's finding for one download from the Hub: none without a revision that is a commit."""
    if revision is not None and HF_COMMIT.fullmatch(revision):
        return
    if revision is None:
        report(path, f"{source} without a revision: every replica loads whatever `main` is when it starts", hint)
    else:
        report(revision_path, f"revision '{revision}' {of} is a branch or tag name, which the repository can move: "
               f"replicas started at different times may {drift}", hint)


@rule("weight-source", "error", "a model's weight source has what it needs, and only that")
def weight_source(bp: Blueprint, report: Reporter) -> None:
    needs = {"hub": set(), "s3": {"uri"}, "volume": {"claim"}}
    allowed = {"hub": {"revision"}, "s3": {"uri"}, "volume": {"claim", "subpath"}}
    for fleet in _inference(bp):
        for model in fleet.models:
            weights = model.weights
            if weights is None:
                continue
            for field in needs[weights.source]:
                if getattr(weights, field) is None:
                    report(weights.path, f"weights from {weights.source} need {field}",
                           "s3: uri: s3://bucket/prefix/" if field == "uri" else "claim: <PersistentVolumeClaim name>")
            for field in ("revision", "uri", "claim", "subpath"):
                if getattr(weights, field) is not None and field not in allowed[weights.source]:
                    key = "path" if field == "subpath" else field
                    report(weights.path + (key,), f"{key} does nothing for weights from {weights.source}",
                           "remove it, or set source to the one it belongs to")
            if weights.source == "s3" and bp.cloud != "aws":
                report(weights.path + ("source",), "weights from s3 need EKS Pod Identity, which is AWS only",
                       "use a volume on this provider")


@frozen
class VllmOption:
    """One option of vLLM's `vllm serve` parser, as providers/vllm-serve-flags.tsv records it."""

    status: str  # ok | deprecated
    arity: str  # 0 | 1 | ? | +: the values argparse takes after it
    value: str  # int | float | size | json | text ('' for arity 0)
    choices: tuple[str, ...]
    optional: bool = False  # vLLM's optional_type: '' and 'None' are taken (as None)


@lru_cache(maxsize=1)
def vllm_options() -> dict[str, VllmOption]:
    """vLLM's server options of the pinned image line (providers/vllm-serve-flags.tsv)."""
    text = resources.files("fleetform.providers").joinpath("vllm-serve-flags.tsv").read_text(encoding="utf-8")
    table = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and not line.startswith("flag\t"):
            flag, _group, status, arity, value, choices = line.split("\t")
            table[flag] = VllmOption(status, arity, value.rstrip("?"), tuple(choices.split("|")) if choices else (),
                                     value.endswith("?"))
    return table


def vllm_flags() -> dict[str, str]:
    """vLLM's server flags of the pinned image line and their status."""
    return {flag: option.status for flag, option in vllm_options().items()}


def flag_name(arg: str) -> str:
    """The flag an argv item names, as vLLM's parser reads it: without =value, `_` as `-`, and the
    top-level name of a --json-arg.key form."""
    name = arg.split("=", 1)[0]
    if name.startswith("--"):
        name = "--" + name[2:].split(".", 1)[0].replace("_", "-")
    elif name.startswith("-O") and name != "-O":
        name = "-O"  # -O3, -O.level: FlexibleArgumentParser's forms of -O (--compilation-config)
    return name


_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
"""argparse's _negative_number_matcher: with no option that looks like one, such an item is a value."""


def _is_option(arg: str, options: dict[str, VllmOption]) -> bool:
    """Whether argparse reads the item as an option (ArgumentParser._parse_optional), not a value."""
    if len(arg) < 2 or not arg.startswith("-"):
        return False
    if flag_name(arg) in options:
        return True
    if _NEGATIVE_NUMBER.match(arg):
        return False
    return " " not in arg


def _value_problem(option: VllmOption, value: str) -> str | None:
    """Why the option's type or choices refuse the value (vllm/engine/arg_utils.py: the type
    functions _compute_kwargs gives: int, float, human_readable_int; optional_type, for an Optional
    field only, passes '' and 'None'), or None."""
    if value in ("", "None") and option.optional:
        return None
    if option.value == "json" and re.fullmatch(r"\s*\{.*\}\s*", value, re.DOTALL):
        try:  # each of vLLM's JSON types parses a {...} value as JSON: parse_dataclass, json.loads, and
            json.loads(value)  # union_dict_and_str, which keeps only a value without braces as text
        except ValueError as err:
            return f"takes a JSON object, and '{value}' is not one ({err.msg} at character {err.pos})"
    try:
        if option.value == "int":
            number = int(value)
        elif option.value == "float":
            float(value)
        elif option.value == "size":
            match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgG])", value.strip())
            if match is None:
                int(value)
            elif match.group(2).isupper():
                int(match.group(1))  # vLLM: no decimals with a binary suffix
    except ValueError:
        kind = {"int": "an integer", "float": "a number", "size": "an integer (25k, 1M)"}[option.value]
        return f"takes {kind}, not '{value}'"
    if option.choices:
        if option.value == "int":
            allowed = number in {int(c) for c in option.choices}
        else:
            allowed = value in option.choices
        if not allowed:
            return f"takes one of {', '.join(option.choices)}, not '{value}'"
    return None


def argv_problems(args: tuple[str, ...] | list[str], owned: frozenset[str] = OWNED_FLAGS) -> list[tuple[int, str, str]]:
    """(index, message, hint) for each item of vLLM server arguments that vLLM 0.11's parser refuses
    at start, read the way it reads them: FlexibleArgumentParser.parse_args (vllm/utils/__init__.py:
    `_` as `-`, -O forms, `--json-arg.key value`) then argparse over the options of
    providers/vllm-serve-flags.tsv, each with its arity. The items follow fleetform's own arguments,
    whose first is the positional model: any other positional is one too many. Unknown flags and
    those in `owned` (fleetform's, for extra_args) are the rule's to report, with their values."""
    options = vllm_options()
    problems: list[tuple[int, str, str]] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if not _is_option(arg, options):
            problems.append((i, f"'{arg}' is neither a flag nor a flag's value: vLLM refuses it as an unrecognized "
                             "argument", "the model is already given; put each value right after its flag"))
            i += 1
            continue
        name = flag_name(arg)
        option = options.get(name)
        i += 1
        if option is None or name in owned:
            while i < len(args) and not _is_option(args[i], options):
                i += 1  # its values: reported with the flag itself
            continue
        explicit = None
        if arg.startswith("-O") and len(arg) > 2 and arg[2] != ".":
            explicit = arg[3:] if arg[2] == "=" else arg[2:]  # -O3, -O=3: one item, the level
        elif "=" in arg:
            explicit = arg.split("=", 1)[1]
        dotted = "." in arg.split("=", 1)[0]
        if dotted:
            if option.value != "json":
                problems.append((i - 1, f"{name} takes no --flag.key form: its value is not JSON",
                                 f"write `{name} VALUE`"))
            if explicit is None:
                if i >= len(args):
                    problems.append((i - 1, f"{arg} needs a value", "give the key's value as the next item"))
                i += 1  # FlexibleArgumentParser takes the next item as the key's value, whatever it is
            continue
        if explicit is not None:
            if option.arity == "0":
                problems.append((i - 1, f"{name} takes no value",
                                 f"write `{name}` to turn it on" + (f", `--no-{name[2:]}` to turn it off"
                                                                    if f"--no-{name[2:]}" in options else "")))
            elif (why := _value_problem(option, explicit)) is not None:
                problems.append((i - 1, f"{name} {why}", "see vllm serve --help=" + name.lstrip("-")))
            continue
        if option.arity == "0":
            continue
        start = i
        while i < len(args) and not _is_option(args[i], options):
            i += 1
        values = list(args[start:i])
        if option.arity in ("1", "?"):
            i = start + min(len(values), 1)  # the rest is stray: reported on the next turn
            values = values[:1]
        if not values and option.arity != "?":
            problems.append((start - 1, f"{name} needs {'a value' if option.arity == '1' else 'one or more values'}",
                             f"give its value as the next item, or as `{name}=VALUE`"))
        for n, value in enumerate(values):
            if (why := _value_problem(option, value)) is not None:
                problems.append((start + n, f"{name} {why}", "see vllm serve --help=" + name.lstrip("-")))
    return problems


@rule("extra-args", "error", "extra_args are vLLM server flags of the pinned image line, none fleetform sets, "
      "each with the values vLLM's parser takes for it")
def extra_args(bp: Blueprint, report: Reporter) -> None:
    options = vllm_options()
    for fleet in _inference(bp):
        for model in fleet.models:
            for i, arg in enumerate(model.extra_args):
                if not _is_option(arg, options):
                    continue  # a value: argv_problems judges it
                name = flag_name(arg)
                path = model.path + ("extra_args", i)
                if name in OWNED_FLAGS or (name == "-O" and "--compilation-config" in OWNED_FLAGS):
                    report(path, f"{name} is set by fleetform", "it follows from the model's fields; change those")
                elif name not in options:
                    report(path, f"{name} is not a flag of vLLM 0.11's server",
                           did_you_mean(name, options, "flags") + " (providers/vllm-serve-flags.tsv)")
                elif options[name].status == "deprecated":
                    report(path, f"{name} is deprecated in vLLM 0.11", "see vllm serve --help for its replacement")
            for i, message, hint in argv_problems(model.extra_args):
                report(model.path + ("extra_args", i), message, hint)


def _node_fit(fleet, end: str):
    """(nodes the fleet has, nodes its models' `end` replicas need, devices per node, device, detail),
    or None when unknown or when tensor-parallel reports a model that fits no node."""
    devices = fleet.devices()
    if devices is None or fleet.nodes is None or not fleet.models:
        return None
    per_node, _, device = devices
    if any(per_node % m.gpus if m.gpus <= per_node else m.gpus % per_node for m in fleet.models):
        return None  # tensor-parallel or lws-parallelism reports it
    replicas = [(m.gpus, getattr(m.replicas, end)) for m in fleet.models]
    per_size: dict[int, int] = {}
    for tp, n in replicas:
        per_size[tp] = per_size.get(tp, 0) + n
    detail = " + ".join(f"{n} x {tp}" for tp, n in sorted(per_size.items(), reverse=True))
    return getattr(fleet.nodes, end), nodes_needed(replicas, per_node), per_node, device, detail


@rule("autoscaler-reach", "error", "the fleet's largest size holds every model at its maximum replicas")
def autoscaler_reach(bp: Blueprint, report: Reporter) -> None:
    for fleet in _inference(bp):
        fit = _node_fit(fleet, "max")
        if fit is not None and fit[1] > fit[0]:
            have, need, per_node, device, detail = fit
            report(fleet.nodes.path,
                   f"at most {_count(have, 'node')} x {per_node} = {have * per_node} devices ({device}), "
                   f"but the models' maximum replicas need {detail} devices, whole replicas on {_count(need, 'node')}",
                   f"raise nodes.max to {need} or lower replicas.max")


@rule("min-nodes-hold", "error", "the fleet's minimum nodes hold every model at its minimum replicas")
def min_nodes_hold(bp: Blueprint, report: Reporter) -> None:
    for fleet in _inference(bp):
        fit, top = _node_fit(fleet, "min"), _node_fit(fleet, "max")
        if fit is None or fit[1] <= fit[0] or (top is not None and top[1] > top[0]):
            continue  # fits, or autoscaler-reach already says the fleet is too small
        have, need, per_node, device, detail = fit
        report(fleet.nodes.path,
               f"{_count(have, 'node')} x {per_node} {device} devices cannot hold the models' minimum replicas "
               f"({detail} devices, whole replicas per node): they need {_count(need, 'node')}",
               f"raise nodes.min to {need} or lower replicas.min: the plan prices {_count(have, 'node')}, and the "
               "replicas beyond them wait Pending for the node autoscaler")


def nodes_needed(replicas: list[tuple[int, int]], per_node: int) -> int:
    """Nodes that hold `count` replicas of `size` devices each, whole on one node. Sizes that divide the
    node (as tensor-parallel checks) fill nodes exactly largest first, so first-fit decreasing is
    optimal here: every size divides every larger one when they are powers of two, and the count
    is never below the devices' sum over the node."""
    free: list[int] = []
    for size, count in sorted(replicas, reverse=True):
        if size > per_node:  # a replica spanning nodes (a LeaderWorkerSet group) takes whole nodes
            free += [0] * (math.ceil(size / per_node) * count)
            continue
        for _ in range(count):
            for i, room in enumerate(free):
                if room >= size:
                    free[i] -= size
                    break
            else:
                free.append(per_node - size)
    return len(free)
@rule("kv-cache-room", "warning",
      f"weights and vLLM's overhead leave at least {KV_CACHE_MIN_SHARE:.0%} of usable GPU memory for the KV cache")
def kv_cache_room(bp: Blueprint, report: Reporter) -> None:
    for fleet in _inference(bp):
        devices = fleet.devices()
        if devices is None:
            continue
        _, device_gb, device = devices
        for model in fleet.models:
            usable = _usable_gb(model, device_gb)
            if model.weights_gb > usable:
                continue  # model-fits reports it
            # vLLM sizes the KV cache from what is left of its budget after the weights, its profiled
            # activation peak and non-torch memory (model.GPU_OVERHEAD_GB per GPU)
            room = usable - model.weights_gb - model.overhead_gb
            if room < KV_CACHE_MIN_SHARE * usable:
                report(model.path + ("tensor_parallel",),
                       f"weights take {model.weights_gb:.1f} and activations and CUDA overhead about "
                       f"{model.overhead_gb:.1f} of {usable:.1f} GB, leaving {max(room, 0):.1f} GB "
                       f"({max(room, 0) / usable:.0%}) for the KV cache",
                       f"keep at least {KV_CACHE_MIN_SHARE:.0%} for the KV cache: raise tensor_parallel, "
                       "share a GPU fewer ways, or use a GPU with more memory")


@rule("autoscale-config", "error", "autoscaled replicas ({min, max}) have an autoscale target and an autoscaler")
def autoscale_config(bp: Blueprint, report: Reporter) -> None:
    for fleet in _inference(bp):
        scheduler = fleet.scheduler
        autoscaler = scheduler.autoscaler if scheduler is not None and scheduler.type == "kubernetes" else None
        for model in fleet.models:
            if not model.replicas.elastic:
                continue
            if model.autoscale is None:
                report(model.replicas.path, f"replicas of '{model.name}' range from {model.replicas.min} to "
                       f"{model.replicas.max}, but nothing says when to scale",
                       "add autoscale: {metric: queue_depth, target_per_replica: 5}")
            elif autoscaler == "none":
                report(scheduler.path + ("autoscaler",), f"model '{model.name}' autoscales, but the fleet's autoscaler is none",
                       "set autoscaler: keda or hpa, or give fixed replicas")


@rule("slo-replicas", "warning", "replicas.min serves the SLO's peak with redundancy and burst headroom")
def slo_replicas(bp: Blueprint, report: Reporter) -> None:
    for fleet in _inference(bp):
        for model in fleet.models:
            slo = model.slo
            if slo is None:
                continue
            qps_per_gpu, how = slo.qps_per_gpu, "per GPU"
            if qps_per_gpu is None:  # estimated from the SLO at the blueprint's shape (fleetform/slo.py)
                from ..slo import for_model

                sized = for_model(fleet, model)
                qps_per_gpu, how = (sized.qps_per_gpu if sized else None), "per GPU (estimated, see plan)"
                if qps_per_gpu is None:
                    continue  # slo-inputs, slo-unmet or slo-shape says why
            base = math.ceil(slo.peak_qps / qps_per_gpu)
            gpus = math.ceil((base + slo.redundancy) * (1 + slo.burst_headroom))
            replicas = math.ceil(gpus / model.gpus)
            if model.replicas.min < replicas:
                report(model.replicas.path,
                       f"the SLO needs {replicas} replicas: {slo.peak_qps:g} QPS / {qps_per_gpu:{'g' if slo.qps_per_gpu else '.3g'}} {how} = {base} GPUs, "
                       f"+{slo.redundancy} spare = {base + slo.redundancy}, x{1 + slo.burst_headroom:g} burst = {gpus} GPUs, "
                       f"/ {model.gpus} per replica; replicas.min is {model.replicas.min}",
                       f"raise replicas.min to {replicas}")


@rule("gpu-sharing", "error", "MIG names a profile of the fleet's GPU; time-slicing and MPS share each GPU 2+ ways")
def gpu_sharing(bp: Blueprint, report: Reporter) -> None:
    for fleet in _inference(bp):
        sharing = fleet.gpu_sharing
        path = sharing.path
        if sharing.strategy == "mig":
            if sharing.replicas is not None:
                report(path + ("replicas",), "replicas applies to time-slicing and mps",
                       "MIG slices are set by the profile; remove replicas")
            if fleet.shape is None:
                continue
            gpu = fleet.shape.gpu
            if not gpu.mig:
                report(path + ("strategy",), f"{gpu.name} does not support MIG",
                       "MIG needs an A100, H100 or H200 (p4d, p4de, p5, p5e, p5en); or use time-slicing")
            elif sharing.profile is None:
                report(path, "MIG needs a profile", f"add profile, one of: {', '.join(gpu.mig)}")
            elif sharing.profile not in gpu.mig:
                report(path + ("profile",), f"'{sharing.profile}' is not a MIG profile of {gpu.name}",
                       did_you_mean(sharing.profile, gpu.mig, f"{gpu.name} profiles"))
        elif sharing.strategy in ("time-slicing", "mps"):
            if sharing.profile is not None:
                report(path + ("profile",), "profile applies to MIG", f"remove it for {sharing.strategy}")
            if sharing.replicas is None or sharing.replicas < 2:
                got = "no replicas" if sharing.replicas is None else f"replicas {sharing.replicas}"
                report(path + ("replicas",) if sharing.replicas is not None else path,
                       f"{sharing.strategy} with {got} shares nothing", "set replicas: 2 or more pods per GPU")
        else:
            for field in ("profile", "replicas"):
                if getattr(sharing, field) is not None:
                    report(path + (field,), f"{field} does nothing without GPU sharing",
                           "remove it, or choose a strategy")


@rule("k8s-version", "error", "the Kubernetes version is one fleetform renders and validates manifests for")
def k8s_version(bp: Blueprint, report: Reporter) -> None:
    low, high = ".".join(map(str, K8S_MIN)), ".".join(map(str, K8S_MAX))
    for fleet in bp.fleets:
        scheduler = fleet.scheduler
        if scheduler is None or scheduler.type not in ("kubernetes", "ray", "slinky"):
            continue
        if not K8S_MIN <= scheduler.minor <= K8S_MAX:
            report(scheduler.path + ("version",), f"Kubernetes {scheduler.version} is outside {low} to {high}",
                   f"fleetform renders and validates manifests for Kubernetes {low} to {high}")


SECRET_FLAGS = {
    "--hf-token": "hf_token_secret",
    "--api-key": "api_key_secret",
}
"""vLLM 0.11.0 server flags whose value is a secret, and the field that gives it by reference instead:
--hf-token (vllm/engine/arg_utils.py, ModelConfig.hf_token: "The token to use as HTTP bearer
authorization for remote files") and --api-key (vllm/entrypoints/openai/cli_args.py, FrontendArgs.api_key:
the keys clients must present); providers/vllm-serve-flags.tsv lists every flag. The aliases vLLM's
FlexibleArgumentParser reads are refused with them: `_` for `-` and `--flag=value` (flag_name undoes
both), and any unambiguous prefix (`--hf-tok`): it subclasses argparse.ArgumentParser without
allow_abbrev=False, so argparse expands a unique prefix to the full flag."""


def secret_flag(arg: str) -> str | None:
    """The secret-carrying vLLM flag an argv item gives, by its name or an alias; None for any other."""
    if not arg.startswith("--"):
        return None
    name = flag_name(arg)
    for flag in SECRET_FLAGS:
        if name == flag or (len(name) > len("--") + 1 and flag.startswith(name) and name not in vllm_flags()):
            return flag
    return None


@rule("secret-flags", "error", "no extra_args item carries a secret (--hf-token, --api-key, their aliases)")
def secret_flags(bp: Blueprint, report: Reporter) -> None:
    """A value in extra_args lands in plain text in the Deployment, plan.json and Pulumi state."""
    for fleet in _inference(bp):
        for model in fleet.models:
            for i, arg in enumerate(model.extra_args):
                flag = secret_flag(arg)
                if flag is not None:
                    # the finding names the flag only, never the value that follows it or its `=`
                    given = flag_name(arg)
                    report(model.path + ("extra_args", i),
                           f"{given if given == flag else f'{given} (vLLM reads it as {flag})'} would put a secret in plain text in the Deployment, plan.json "
                           "and Pulumi state",
                           f"remove it and the value after it; set {SECRET_FLAGS[flag]}: <Secret name> instead")


@rule("scale-to-zero", "error", "inference nodes.min is at least 1, and replicas.min too unless a gateway with KEDA can wake the model")
def scale_to_zero(bp: Blueprint, report: Reporter) -> None:
    """Nothing would scale back up from zero: the API server refuses an HPA with minReplicas 0 (the
    HPAScaleToZero feature gate is alpha and off, and EKS does not turn it on; Kubernetes API,
    HorizontalPodAutoscalerSpec.minReplicas: "It defaults to 1 pod. minReplicas is allowed to be 0 if the
    alpha feature gate HPAScaleToZero is enabled"); KEDA's only trigger reads a metric of the pods that no
    longer exist; and a node group at zero never matches a pod that selects the nvidia.com/gpu.product
    label GPU Feature Discovery adds at run time. A model behind the fleet's gateway with KEDA may have
    replicas.min 0: the endpoint picker counts its requests while no replica runs (k8s.wake_triggers)."""
    hint = "use 1 or more; nodes scaling to zero is tracked as a separate issue"
    for fleet in _inference(bp):
        if fleet.scheduler is None or fleet.scheduler.type != "kubernetes":
            continue
        if fleet.nodes is not None and fleet.nodes.min == 0:
            report(fleet.nodes.path + ("min",), f"fleet '{fleet.name}' may scale to 0 nodes: the node group never "
                   "scales up again for pods that select the GPU label GPU Feature Discovery sets at run time", hint)
        for model in fleet.models:
            # behind a gateway with KEDA, the endpoint picker counts a request for a model with no replica,
            # and the wake trigger (k8s.wake_triggers) activates on it; cold-start-budget checks the wait
            woken = fleet.gateway is not None and fleet.scheduler.autoscaler == "keda"
            if model.replicas.min == 0 and not woken:
                report(model.replicas.path + ("min",), f"model '{model.name}' may scale to 0 replicas: the API server "
                       "refuses an HPA with minReplicas 0, and KEDA's queue metric comes from the pods themselves",
                       "use 1 or more, or put the fleet behind a gateway (gateway:) with scheduler.autoscaler: keda")
