"""Training fleets scheduled by Slurm on EKS through SchedMD's Slinky (fleetform/slinky.py): the slurm.conf the
operator's slurmctld reads passes the real slurmctld with the node line slurmd pods register with; the `slurm`
chart's values fleetform renders, and the operator's, use only keys of the pinned charts' values.yaml
(tests/data/slurm-1.2.1-values.yaml, slurm-operator-1.2.1-values.yaml); the NodeSet, Controller and LoginSet the
chart makes of them pass slurm-operator v1.2.1's CRD schemas (tests/crd/slinky.slurm.net_v1beta1_*.json); the
node line and gres.conf are a Slurm fleet's; the cluster admits the slurmd pods; the releases come in order.

Debian's slurmctld here is 22.05; Slinky's chart 1.2.1 runs Slurm 26.05 (the operator needs 25.11 or later). The
check proves what 22.05 already parses: the NodeSet and partition lines, the registered node line, MaxNodeCount,
auth/jwt with its key, select/cons_tres, DefCpuPerGPU/DefMemPerGPU, cgroup.conf. It does not prove GRES: 22.05's
slurmctld accepts a gres.conf key it does not know and Gres= without GresTypes (measured), so the slinky-gres rule
checks those. auth/slurm and cred/slurm (23.11+) are replaced by auth/none as for every fleet (tests/slurmctld.py),
and whatever 25.11+ parses differently from 22.05 is not proven here.

What only a real EKS cluster would prove (not run here): that the operator makes the pods, that slurmd registers
with 8 GPUs and 32 EFA devices visible, that NCCL crosses nodes over EFA, and that a job submitted from the login
pod runs."""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
from dataclasses import replace

import jsonschema
import kubernetes_validate
import pytest
import yaml

from conftest import ROOT, require
from fleetform.cluster import addons_data
from fleetform.pipeline import check
from fleetform.plan import record
from fleetform.render import render
from fleetform.rules import REGISTRY, Reporter

EXAMPLE = ROOT / "blueprints/slurm-on-eks.yaml"
TEXT = EXAMPLE.read_text()
CHART = yaml.safe_load((ROOT / "tests/data/slurm-1.2.1-values.yaml").read_text())
OPERATOR_CHART = yaml.safe_load((ROOT / "tests/data/slurm-operator-1.2.1-values.yaml").read_text())
CRDS = {kind: __import__("json").loads((ROOT / f"tests/crd/slinky.slurm.net_v1beta1_{kind}.json").read_text())
        for kind in ("NodeSet", "Controller", "LoginSet")}
RELEASE = "kubernetes:helm.sh/v3:Release"


def _check(text: str, tmp_path):
    path = tmp_path / "bp.yaml"
    path.write_text(text)
    return check(path)


def _model(text: str, tmp_path):
    result = _check(text, tmp_path)
    assert result.model is not None, [f.to_text() for f in result.findings]
    return result.model


def _rules(text: str, tmp_path, rule: str) -> list[str]:
    return [f.message for f in _check(text, tmp_path).findings if f.rule == rule]


def _run(rule: str, bp) -> list[str]:
    reporter = Reporter()
    reporter.current = REGISTRY[rule]
    REGISTRY[rule].check(bp, reporter)
    return [i.message for i in reporter.issues]


def _with_slinky(bp, **changes):
    fleet = bp.fleets[0]
    return replace(bp, fleets=(replace(fleet, slinky=replace(fleet.slinky, **changes)),) + bp.fleets[1:])


def test_the_example_validates_clean_and_renders_the_chart_values_and_slurm_files(tmp_path):
    result = _check(TEXT, tmp_path)
    # no error; the example names its users' directory (test_users_rule_says_no_job_runs_until_...), and keeps the
    # chart's slurmd image, which has no aws-ofi-nccl (test_efa_image_rule_...)
    assert [f.rule for f in result.findings] == ["slinky-efa-image"]
    files = render(result.model)
    assert {p for p in files if p.startswith("train/")} == {
        "train/k8s/namespace.yaml", "train/k8s/storageclass.yaml", "train/k8s/kustomization.yaml", "train/nccl.env",
        "train/slinky/values.yaml", "train/slinky/slurm.conf", "train/slinky/gres.conf", "train/slinky/sssd.conf"}
    assert not any(p.startswith("train/slurm/") for p in files)  # no controller instance, no slurm/bin programs
    namespace = yaml.safe_load(files["train/k8s/namespace.yaml"])
    kubernetes_validate.validate(namespace, "1.35.0", strict=True)
    assert namespace["metadata"]["name"] == result.model.fleets[0].slinky.namespace == "slurm"
    kubectl = require("kubectl", "kubernetes-client")
    for name, data in files.items():
        (tmp_path / "out" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "out" / name).write_bytes(data)
    built = subprocess.run([kubectl, "kustomize", str(tmp_path / "out/train/k8s")], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    assert [o["kind"] for o in yaml.safe_load_all(built.stdout)] == ["Namespace", "StorageClass"]


def test_render_check_accepts_the_examples_own_render(tmp_path):
    out = tmp_path / "out"
    command = [sys.executable, "-m", "fleetform", "render", str(EXAMPLE), "-o", str(out)]
    assert subprocess.run(command, capture_output=True).returncode == 0
    assert subprocess.run(command + ["--check"], capture_output=True).returncode == 0
    (out / "train/slinky/values.yaml").write_text("replicas: 1\n")
    stale = subprocess.run(command + ["--check"], capture_output=True, text=True)
    assert stale.returncode == 1 and "train/slinky/values.yaml" in stale.stdout + stale.stderr


def _slurmd_conf(values: dict, host_mib: int, host_cores: int, threads: int) -> list[tuple[str, str]]:
    """The items of the --conf a NodeSet's slurmd runs with, in order: slurm-operator v1.2.1's (worker_app.go
    slurmdConfArgs: the extraConf's keys title-cased, Features= merged after the NodeSet's own name, sorted), then
    what the slurmd image's entrypoint appends from the container's limits (SlinkyProject/containers
    schedmd/slurm/26.05/ubuntu26.04 slurmd-entrypoint.sh main, addConfItem): CoreSpecCount = cores - POD_CPUS /
    ThreadsPerCore, MemSpecLimit = `slurmd -C`'s RealMemory - POD_MEMORY, each only above 0. POD_CPUS is the CPU
    limit rounded up, POD_MEMORY the memory limit's bytes / 1024 / 1024 (worker_app.go getResourceLimits);
    `slurmd -C` in the pod reports the host's cores and memory."""
    from fleetform.cluster import quantity

    (name, nodeset), = values["nodesets"].items()
    conf = {"Features": name}
    for item in nodeset["extraConf"].split():
        key, val = item.split("=", 1)
        key = key[0].upper() + key[1:].lower()  # cases.Title
        key = "Features" if key in ("Feature", "Features") else key
        conf[key] = conf[key] + "," + val if key in conf else val
    items = sorted(conf.items(), key=lambda kv: f"{kv[0]}={kv[1]}")
    limits = nodeset["slurmd"]["resources"]["limits"]
    pod_cpus = -(-int(quantity(str(limits["cpu"])) * 1000) // 1000)
    pod_memory = int(quantity(str(limits["memory"]))) // 2**20
    core_spec = host_cores - pod_cpus // threads
    mem_spec = host_mib - pod_memory
    return items + [(k, str(v)) for k, v in (("CoreSpecCount", core_spec), ("MemSpecLimit", mem_spec)) if v > 0]


def _node(values: dict, host_mib: int, host_cores: int, threads: int) -> dict[str, str]:
    """The node slurmd registers: RealMemory as `slurmd -C` reports it unless --conf names one (slurmd(8) --conf),
    the later of two values of one key (Slurm's parse_config.c: "specified more than once, latest value used");
    keys as Slurm reads them, in any case."""
    node = {"realmemory": str(host_mib)}
    for key, val in _slurmd_conf(values, host_mib, host_cores, threads):
        node[key.lower()] = val
    return node


def _host(model=None):
    """(RealMemory MiB, cores, ThreadsPerCore) `slurmd -C` reports on the fleet's instance: the catalog's memory and
    vCPUs, the shape's threads (the example's when no model is given)."""
    fleet = (model or check(EXAMPLE).model).fleets[0]
    threads = fleet.shape.threads_per_core
    return fleet.instance.mem_gib * 1024, fleet.instance.vcpus // threads, threads


def _registered(conf_text: str, values: dict, host=None) -> str:
    """The node line slurmctld holds once the NodeSet's slurmd pods registered (_node), one per pod
    <nodeset>-<ordinal>."""
    (name, nodeset), = values["nodesets"].items()
    node = _node(values, *(host or _host()))
    names = f"{name}-[0-{nodeset['replicas'] - 1}]" if nodeset["replicas"] > 1 else f"{name}-0"
    return conf_text + f"NodeName={names} " + " ".join(f"{k}={v}" for k, v in sorted(node.items())) + "\n"


def _slurm_folder(files: dict, folder, jwt: bool = True):
    """<fleet>/slinky/ as the operator mounts it in slurmctld's /etc/slurm: slurm.conf, gres.conf (configFiles),
    the operator's own cgroup.conf (controller_config.go buildCgroupConf) and the JWT key the chart generates."""
    import slurmctld  # noqa: F401  (tests/slurmctld.py)

    folder.mkdir()
    values = yaml.safe_load(files["train/slinky/values.yaml"])
    text = files["train/slinky/slurm.conf"].decode().replace("/etc/slurm/", f"{folder}/")
    (folder / "slurm.conf").write_text(_registered(text, values))
    (folder / "gres.conf").write_text(values["configFiles"]["gres.conf"])
    assert values["configFiles"]["gres.conf"] in files["train/slinky/gres.conf"].decode()
    (folder / "cgroup.conf").write_text("CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\n")
    if jwt:
        (folder / "jwt.key").write_bytes(os.urandom(32))
    return folder


def test_slurmctld_reads_the_operators_slurm_conf_with_the_registered_nodes(tmp_path):
    require("slurmctld", "slurmctld")
    import slurmctld

    files = render(_model(TEXT, tmp_path))
    outcome = slurmctld.check(_slurm_folder(files, tmp_path / "etc"))
    assert outcome.ok, slurmctld.problems(outcome) or outcome.output[-2000:]
    # negative controls: the same check fails on a partition naming another NodeSet and without the JWT key the
    # operator's AuthAltTypes=auth/jwt needs. slurmctld 22.05 does not refuse a gres.conf key it does not know, a
    # Gres= type missing from GresTypes, or no GresTypes at all (measured): the slinky-gres rule must.
    part = _slurm_folder(files, tmp_path / "bad-partition")
    conf = part / "slurm.conf"
    conf.write_text(conf.read_text().replace("PartitionName=train Nodes=train", "PartitionName=train Nodes=nope-[0-1]"))
    assert not slurmctld.check(part).ok
    assert not slurmctld.check(_slurm_folder(files, tmp_path / "no-jwt", jwt=False)).ok


@pytest.mark.parametrize("instance_type", ["p5.48xlarge", "g6e.12xlarge", "g5.xlarge", "p4d.24xlarge"])
def test_a_registered_node_gives_jobs_the_pods_memory_and_cpus_and_a_job_for_every_gpu_fits(tmp_path, instance_type):
    """The node slurmd registers with, from the rendered values as the operator and the slurmd image's entrypoint
    make its --conf (_node): jobs get RealMemory - MemSpecLimit, the pod's memory limit, and CPUs less the
    specialized cores' threads, the pod's CPU limit at most; a job asking for every GPU and nothing else asks for
    DefMemPerGPU and DefCpuPerGPU per GPU (the controller's extraConf), which must fit one node. fleetform's node line
    set RealMemory=<the pod's limit> and MemSpecLimit=41943, and the entrypoint's MemSpecLimit=<host - pod>, later,
    won: a p5.48xlarge gave jobs 2 x 1,886,028 - 2,097,152 = 1,674,904 MiB, less than 230,510 x 8 = 1,844,080, and the
    README's `sbatch -N 4 --gres=gpu:8` never started."""
    model = _model(TEXT.replace("instance_type: p5.48xlarge", f"instance_type: {instance_type}"), tmp_path)
    values = yaml.safe_load(render(model)["train/slinky/values.yaml"])
    node = _node(values, *_host(model))
    defaults = dict(line.split("=", 1) for line in values["controller"]["extraConf"].splitlines() if "=" in line)
    limits = values["nodesets"]["train"]["slurmd"]["resources"]["limits"]
    gpus = int(limits["nvidia.com/gpu"])
    job_memory = int(node["realmemory"]) - int(node.get("memspeclimit", 0))
    job_cpus = int(node["cpus"]) - int(node.get("corespeccount", 0)) * int(node["threadspercore"])
    assert job_memory == int(str(limits["memory"]).removesuffix("Mi"))
    assert int(defaults["DefMemPerGPU"]) * gpus <= job_memory
    assert int(defaults["DefCpuPerGPU"]) * gpus <= job_cpus <= int(str(limits["cpu"]).removesuffix("m")) // 1000
    # no key twice: slurmd logs "specified more than once" and uses the later
    keys = [k.lower() for k, _ in _slurmd_conf(values, *_host(model))]
    assert len(keys) == len(set(keys)), keys
    assert model.fleets[0].slinky.job_memory_mib == job_memory and _run("slinky-memory", model) == []


FREE_FORM = ("nodeSelector",)
"""Maps whose keys are the user's (Kubernetes label selectors), though the chart's default has one."""


def _missing_keys(values, chart, path=()) -> list[tuple]:
    """Paths of `values` the chart's values.yaml does not have. A chart default that is empty ({} or [] or null)
    is free-form (resources, nodeSelector, extraConf); nodesets.<name> and loginsets.<name> are checked against
    the chart's nodesetDefaults and loginsetDefaults, which its templates merge under each (nodeset-cr.yaml)."""
    out = []
    for key, value in values.items():
        here = path + (key,)
        if path in (("nodesets",), ("loginsets",)) and not chart:
            default = CHART["nodesetDefaults" if path == ("nodesets",) else "loginsetDefaults"]
            out += _missing_keys(value, default, here) if isinstance(value, dict) else []
            continue
        if not isinstance(chart, dict) or key not in chart:
            out.append(here)
            continue
        if isinstance(value, dict) and (chart[key] or here in (("nodesets",), ("loginsets",))) and key not in FREE_FORM:
            out += _missing_keys(value, chart[key], here)
    return out


def test_the_rendered_values_use_only_keys_of_the_slurm_chart_1_2_1(tmp_path):
    values = yaml.safe_load(render(_model(TEXT, tmp_path))["train/slinky/values.yaml"])
    assert _missing_keys(values, CHART) == []
    assert _missing_keys({"nodesets": {"x": {"slurmd": {"resourcez": {}}}}, "controler": {}, "clusterName": "x"},
                         CHART) == [("nodesets", "x", "slurmd", "resourcez"), ("controler",)]


def test_the_operator_is_a_pinned_release_with_keys_of_its_chart_before_the_fleets_slurm_release(tmp_path):
    model = _model(TEXT, tmp_path)
    resources = record(model, render(model))
    releases = {r["name"]: r for r in resources if r["type"] == RELEASE}
    operator = releases["eks-slurm-operator"]["inputs"]
    assert (operator["chart"], operator["version"]) == ("oci://ghcr.io/slinkyproject/charts/slurm-operator", "1.2.1")
    assert operator["values"]["crds"] == {"enabled": True}  # the CRDs come with the operator, before any NodeSet
    assert _missing_keys(operator["values"], OPERATOR_CHART) == []
    fleet = releases["train-slurm"]
    assert (fleet["inputs"]["chart"], fleet["inputs"]["version"], fleet["inputs"]["name"]) == (
        "oci://ghcr.io/slinkyproject/charts/slurm", "1.2.1", "slurm-train")
    assert "eks-slurm-operator" in fleet["depends_on"] and "train-gpu" in fleet["depends_on"]
    assert fleet["inputs"]["values"] == yaml.safe_load(render(model)["train/slinky/values.yaml"])
    # the GPU nodes: EFA on every network card (p5.48xlarge: 32) in a cluster placement group
    (template,) = [r for r in resources if r["name"] == "train-nodes"]
    interfaces = template["inputs"]["networkInterfaces"]
    # card 0: an interface and an efa-only device, every other card an efa-only device (DESIGN.md, EFA launch templates)
    assert len(interfaces) == 33 and [i["interfaceType"] for i in interfaces].count("efa-only") == 32
    assert template["inputs"]["placement"]["groupName"]
    (group,) = [r for r in resources if r["name"] == "train-placement"]
    assert group["inputs"]["strategy"] == "cluster"
    assert "aws-efa-k8s-device-plugin" in {r.name for r in model.cluster.releases}
    assert addons_data()["charts"]["slurm-operator"]["version"] == "1.2.1"


def _crs(values: dict) -> dict:
    """The NodeSet, Controller and LoginSet the `slurm` chart 1.2.1 makes of these values, built as its templates
    do (helm/slurm/templates/nodeset/nodeset-cr.yaml, controller/controller-cr.yaml, loginset/loginset-cr.yaml):
    each entry merged over the chart's defaults, containers with the image formatted, the pod template's spec."""
    def merged(defaults, value):
        out = copy.deepcopy(defaults)
        for key, item in value.items():
            out[key] = merged(out[key], item) if isinstance(item, dict) and isinstance(out.get(key), dict) else item
        return out

    def container(c):
        image = c["image"]  # _helpers.tpl slurm.format-image: repository@digest where a digest is given, else :tag
        ref = f"{image['repository']}@{image['digest']}" if image.get("digest") else \
            f"{image['repository']}:{image['tag']}"
        return {**{k: v for k, v in c.items() if k != "image"}, "image": ref}

    chart = merged(CHART, values)
    (key, ns), = values["nodesets"].items()
    ns = merged(CHART["nodesetDefaults"], ns)
    nodeset = {"apiVersion": "slinky.slurm.net/v1beta1", "kind": "NodeSet", "metadata": {"name": f"slurm-worker-{key}"},
               "spec": {"controllerRef": {"name": "slurm"}, "extraConf": ns["extraConf"],
                        "partition": {"enabled": ns["partition"]["enabled"], "config": ns["partition"]["config"]},
                        "scalingMode": ns["scalingMode"], "replicas": ns["replicas"],
                        "slurmd": container(ns["slurmd"]), "logfile": container(ns["logfile"]),
                        "template": {"spec": {**ns["podSpec"], "hostname": f"{key}-"}},
                        "updateStrategy": ns["updateStrategy"], "ordinalPadding": ns["ordinalPadding"],
                        "pinToNode": ns["pinToNode"], "workloadDisruptionProtection": ns["workloadDisruptionProtection"],
                        "pruneSlurmNodeRecords": ns["pruneSlurmNodeRecords"],
                        "oversubscribeNode": ns["oversubscribeNode"]}}
    # _helpers.tpl slurm.sssdConf.name/key: the blueprint's sssd.secretRef, or the Secret the chart makes of sssd.conf
    secret_ref = chart["sssd"]["secretRef"] or {}
    sssd_ref = {"name": secret_ref.get("name", "slurm-sssd-conf"), "key": secret_ref.get("key", "sssd.conf")}
    if ns["ssh"]["enabled"]:  # nodeset-cr.yaml: ssh with its sssdConfRef only when enabled
        # the chart's default extraSshdConfig is null: the API server prunes a null of a field that is not nullable
        # before validating (k8s.io/apiextensions-apiserver pkg/apiserver/schema/defaulting/prunenulls.go
        # PruneNonNullableNullsWithoutDefaults; the CRD gives extraSshdConfig no default and no nullable)
        nodeset["spec"]["ssh"] = {**{k: v for k, v in ns["ssh"].items() if v is not None}, "sssdConfRef": sssd_ref}
    ctl = chart["controller"]
    controller = {"apiVersion": "slinky.slurm.net/v1beta1", "kind": "Controller", "metadata": {"name": "slurm"},
                  "spec": {"clusterName": chart["clusterName"], "extraConf": ctl["extraConf"],
                           "configFileRefs": [{"name": "slurm-config"}],
                           "slurmKeyRef": {"name": "slurm-auth-slurm", "key": "slurm.key"},
                           "jwtKeyRef": {"name": "slurm-auth-jwths256", "key": "jwt_hs256.key"},
                           "slurmctld": container(ctl["slurmctld"]), "reconfigure": container(ctl["reconfigure"]),
                           "logfile": container(ctl["logfile"]), "template": {"spec": ctl["podSpec"]}}}
    (lkey, ls), = values["loginsets"].items()
    ls = merged(CHART["loginsetDefaults"], ls)
    loginset = {"apiVersion": "slinky.slurm.net/v1beta1", "kind": "LoginSet", "metadata": {"name": f"slurm-login-{lkey}"},
                "spec": {"controllerRef": {"name": "slurm"}, "replicas": ls["replicas"], "login": container(ls["login"]),
                         "initconf": container(ls["initconf"]), "template": {"spec": ls["podSpec"]},
                         "service": ls["service"], "sssdConfRef": sssd_ref}}
    return {"NodeSet": nodeset, "Controller": controller, "LoginSet": loginset}


def test_the_charts_custom_resources_pass_slurm_operators_crd_schemas(tmp_path):
    values = yaml.safe_load(render(_model(TEXT, tmp_path))["train/slinky/values.yaml"])
    crs = _crs(values)
    from crd_cel import check as cel_rules  # the CRDs' x-kubernetes-validations (the Controller's key refs)

    for kind, obj in crs.items():
        errors = [e.message for e in jsonschema.Draft202012Validator(CRDS[kind]).iter_errors(obj)]
        assert errors == [], (kind, errors)
        assert cel_rules(CRDS[kind], obj)[1] == [], kind
    unkeyed = copy.deepcopy(crs["Controller"])
    del unkeyed["spec"]["slurmKeyRef"]  # "!self.external ? has(self.slurmKeyRef) : true"
    assert cel_rules(CRDS["Controller"], unkeyed)[1]
    # negative controls: a replica count as a string, a partition config as a map, an unknown spec field
    broken = copy.deepcopy(crs["NodeSet"])
    broken["spec"]["replicas"] = "4"
    broken["spec"]["partition"]["config"] = {"Default": "YES"}
    broken["spec"]["gres"] = "gpu:8"  # slurm-operator#106 patched a `gres` field the NodeSet does not have
    assert len(list(jsonschema.Draft202012Validator(CRDS["NodeSet"]).iter_errors(broken))) == 3


def test_the_node_line_and_gres_conf_are_a_slurm_fleets_of_the_same_instance(tmp_path):
    """fleetform/slurm.py derives both: a Slurm fleet of 4 p5.48xlarge says the same CPUs, sockets, Gres=, features
    and gres.conf devices. RealMemory, CoreSpecCount and MemSpecLimit are left to slurmd -C and the slurmd image's
    entrypoint, which append them from the pod's limits: jobs get the pod's memory and CPUs."""
    slurm_text = re.sub(r"    scheduler:\n(      .*\n)+", "    scheduler:\n      type: slurm\n", TEXT).replace(
        "  eks:\n    system_nodes: {instance_type: m7i.xlarge, nodes: 2}\n", "")
    slurm_fleet = _model(slurm_text, tmp_path).fleets[0]
    s = _model(TEXT, tmp_path).fleets[0].slinky
    node, gres = slurm_fleet.slurm.nodes[0], slurm_fleet.slurm.gres[0]
    conf = dict(item.split("=", 1) for item in s.node_conf.split())
    assert (int(conf["CPUs"]), int(conf["Sockets"]), int(conf["CoresPerSocket"]), int(conf["ThreadsPerCore"])) == (
        node.cpus, node.sockets, node.cores_per_socket, node.threads_per_core)
    assert (conf["Gres"], conf["Features"]) == (node.gres, node.features)
    assert (s.gres_type, s.gres_file, s.gres_devices) == (gres.type, gres.file, gres.devices)
    assert not {"RealMemory", "MemSpecLimit", "CoreSpecCount"} & set(conf)
    assert s.entrypoint_conf == f"CoreSpecCount=10 MemSpecLimit={2048 * 1024 - s.memory_mib}"
    assert s.job_memory_mib == s.memory_mib == 1886028
    # the CPUs are the pod's too: the cores past its limit are specialized (CoreSpecCount), DefCpuPerGPU shares the rest
    assert s.core_spec_count == 10 and s.job_cpus == 172 <= s.cpu_m / 1000
    assert s.def_cpu_per_gpu == s.job_cpus // 8 == 21 < slurm_fleet.slurm.def_cpu_per_gpu


def test_the_login_pods_nccl_environment_is_the_fleets_nccl_env_but_the_host_interface(tmp_path):
    """Jobs inherit the environment sbatch runs in (sbatch --export=ALL is the default): the login pod carries
    nccl.env's variables, except NCCL_SOCKET_IFNAME, which names a host interface a pod does not have."""
    text = TEXT.replace("    nccl:\n      debug: WARN\n", "    nccl:\n      debug: WARN\n      env: {NCCL_SOCKET_IFNAME: ens}\n")
    files = render(_model(text, tmp_path))
    env_file = dict(line.split("=", 1) for line in files["train/nccl.env"].decode().splitlines()
                    if line and not line.startswith("#"))
    login = yaml.safe_load(files["train/slinky/values.yaml"])["loginsets"]["train"]["login"]["env"]
    assert "NCCL_SOCKET_IFNAME" in env_file
    assert "the env of its login pod slurm-train-login-train" in files["train/nccl.env"].decode()  # not a node's file
    assert {e["name"]: e["value"] for e in login} == {k: v.strip('"') for k, v in env_file.items()
                                                      if k != "NCCL_SOCKET_IFNAME"}


def test_the_cluster_admits_the_slurmd_pods_and_refuses_one_a_node_cannot_hold(tmp_path):
    model = _model(TEXT, tmp_path)
    (pod,) = [w for w in model.cluster.workloads if w.kind == "NodeSet"]
    assert dict(pod.devices) == {"nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": 32}
    assert _run("cluster-admission", model) == []
    greedy = replace(pod, devices=(("nvidia.com/gpu", 8), ("vpc.amazonaws.com/efa", 33)))
    big = tuple(greedy if w is pod else w for w in model.cluster.workloads)
    assert _run("cluster-admission", replace(model, cluster=replace(model.cluster, workloads=big)))


def test_gres_rule_finds_the_operators_known_mismatches(tmp_path):
    model = _model(TEXT, tmp_path)
    assert _run("slinky-gres", model) == [] and _run("slinky-memory", model) == []
    assert any("GresTypes" in m for m in _run("slinky-gres", _with_slinky(model, gres_types=())))
    assert any("Gres=(null)" in m for m in _run("slinky-gres", _with_slinky(model, gres="gpu:nvidia_h100_80gb_hbm3:8")))
    assert any("nvidia.com/gpu limit 1" in m for m in _run("slinky-gres", _with_slinky(model, gpus=1)))
    s = model.fleets[0].slinky
    assert any("OOM" in m for m in _run("slinky-memory", _with_slinky(model, real_memory_mib=s.real_memory_mib + 1)))
    # the node line of before: RealMemory=<the pod's limit>, under the entrypoint's MemSpecLimit=<host - pod>
    twice = _with_slinky(model, real_memory_mib=s.memory_mib)
    assert any("less than the pod has" in m for m in _run("slinky-memory", twice))
    assert any("never start" in m for m in _run("slinky-memory", _with_slinky(model, def_mem_per_gpu_mib=235754)))
    # CPUs: the pod's limit holds the node's jobs (CoreSpecCount), DefCpuPerGPU shares what is left
    assert _run("slinky-cpus", model) == []
    assert any("throttled" in m for m in _run("slinky-cpus", _with_slinky(model, core_spec_count=0)))
    assert any("never start" in m for m in _run("slinky-cpus", _with_slinky(model, def_cpu_per_gpu=24)))


def test_memory_rule_refuses_a_node_line_setting_a_key_the_entrypoint_appends(tmp_path, monkeypatch):
    """RealMemory, CoreSpecCount or MemSpecLimit in the NodeSet's extraConf (in any case: slurm-operator title-cases
    the keys, Slurm reads them in any case) is given twice once the entrypoint appends its own, and the later wins."""
    from fleetform.slinky import SlinkyConfig

    model = _model(TEXT, tmp_path)
    line = model.fleets[0].slinky.node_conf
    for extra in ("RealMemory=1886028", "Corespeccount=10", "MEMSPECLIMIT=41943"):
        monkeypatch.setattr(SlinkyConfig, "node_conf", property(lambda self, extra=extra: f"{line} {extra}"))
        found = _run("slinky-memory", model)
        assert any("slurmd would use the entrypoint's values" in m for m in found), (extra, found)
    monkeypatch.setattr(SlinkyConfig, "node_conf", property(lambda self: line))
    assert _run("slinky-memory", model) == []


@pytest.mark.parametrize("instance_type", ["g6e.12xlarge", "g5.xlarge", "g6.16xlarge", "p5.48xlarge"])
def test_the_slurmd_pods_cpu_limit_is_whole_cpus_so_the_entrypoints_core_spec_fits_it(tmp_path, instance_type):
    """slurm-operator v1.2.1 passes the slurmd container's CPU limit rounded UP to whole CPUs as POD_CPUS
    (workerbuilder/worker_app.go getResourceLimits: Quantity.Value()), and the slurmd image's entrypoint appends
    CoreSpecCount=<cores - POD_CPUS / ThreadsPerCore> after fleetform's (SlinkyProject/containers
    schedmd/slurm/26.05/ubuntu26.04 slurmd-entrypoint.sh calculateCoreSpecCount, addConfItem). With a fractional
    limit (g6e.12xlarge: 43029m -> POD_CPUS 44 -> 22 cores -> 44 CPUs for jobs) the jobs get more than the limit and
    slinky-cpus refused the blueprint with "report this". A whole-CPU limit makes POD_CPUS the limit itself."""
    model = _model(TEXT.replace("instance_type: p5.48xlarge", f"instance_type: {instance_type}"), tmp_path)
    s = model.fleets[0].slinky
    assert s.cpu_m % 1000 == 0
    pod_cpus = -(-s.cpu_m // 1000)  # Quantity.Value(): rounded up
    entrypoint = max(0, s.sockets * s.cores_per_socket - pod_cpus // s.threads_per_core)
    assert s.core_spec_count == entrypoint and s.job_cpus <= s.cpu_m / 1000
    assert _run("slinky-cpus", model) == []


def test_size_rules_refuse_a_range_and_more_nodes_than_max_node_count(tmp_path):
    assert _rules(TEXT.replace("    nodes: 4\n", "    nodes: {min: 2, max: 4}\n"), tmp_path, "slinky-size")
    assert any("MaxNodeCount=1024" in m for m in
               _rules(TEXT.replace("    nodes: 4\n", "    nodes: 1025\n"), tmp_path, "slinky-size"))
    assert _rules(TEXT, tmp_path, "slinky-size") == []


def test_schema_refuses_fields_of_other_schedulers(tmp_path):
    bad = TEXT.replace("      cluster_name: train\n", "      cluster_name: train\n      job_image: x:1\n")
    assert any(f.rule == "schema" and "job_image" in f.path for f in _check(bad, tmp_path).findings)
    missing = TEXT.replace('      version: "1.35"\n      namespace: slurm\n', "      namespace: slurm\n")
    assert any(f.rule == "schema" for f in _check(missing, tmp_path).findings)


@pytest.mark.parametrize("cloud_text", ["onprem"])
def test_placement_rule_refuses_slinky_off_aws(tmp_path, cloud_text):
    from fleetform.model import SlinkyScheduler

    model = _model(TEXT, tmp_path)
    assert _run("slinky-placement", model) == []
    assert isinstance(model.fleets[0].scheduler, SlinkyScheduler)
    assert _run("slinky-placement", replace(model, cloud=cloud_text))


def test_plan_and_diff_cover_the_fleet_like_other_training_fleets(tmp_path):
    """plan sizes and prices the fleet; diff prices a change and calls a change of the NodeSet a node roll: the
    operator drains each old slurmd pod's Slurm node and replaces the pod once its jobs end (slurm-operator v1.2.1
    nodeset_sync.go syncRollingUpdate, doPodScale), not an update nothing running notices."""
    plan = subprocess.run([sys.executable, "-m", "fleetform", "plan", str(EXAMPLE)], capture_output=True, text=True)
    assert plan.returncode == 0 and "train (training)" in plan.stdout and "train           p5.48xlarge  4" in plan.stdout
    changed = tmp_path / "changed.yaml"
    changed.write_text(TEXT.replace("instance_type: p5.48xlarge", "instance_type: p5en.48xlarge"))
    diff = subprocess.run([sys.executable, "-m", "fleetform", "diff", str(EXAMPLE), str(changed)],
                          capture_output=True, text=True)
    assert "[node roll] Release train-slurm: Slinky's NodeSet rolls its slurmd pods" in diff.stdout, diff.stdout
    assert "train: 4 x p5.48xlarge ($160,717 a month) -> 4 x p5en.48xlarge" in diff.stdout


def test_namespace_rule_refuses_kubernetes_a_charts_and_another_fleets_namespace(tmp_path):
    assert _rules(TEXT, tmp_path, "slinky-namespace") == []
    for namespace, why in (("kube-system", "Kubernetes' own"), ("slinky", "the slurm-operator release's")):
        found = _rules(TEXT.replace("      namespace: slurm\n", f"      namespace: {namespace}\n"), tmp_path,
                       "slinky-namespace")
        assert any(why in m for m in found), (namespace, found)
    second = TEXT + TEXT[TEXT.index("  - name: train"):].replace("  - name: train", "  - name: train2").replace(
        "cluster_name: train", "cluster_name: train2")
    assert any("fleet 'train2''s too" in m for m in _rules(second, tmp_path, "slinky-namespace"))


def test_diff_does_not_tell_a_slinky_fleets_nodes_to_install_its_nccl_env(tmp_path):
    """No node of a Slinky fleet reads nccl.env (its variables are the login pod's env, which sbatch copies into a job
    when it is submitted): diff must not say that every node installs the file before its next job, as it does for a
    Slurm fleet's keeper, but that the login pod is replaced and jobs submitted from the new one get the change."""
    changed = tmp_path / "debug.yaml"
    changed.write_text(TEXT.replace("debug: WARN", "debug: INFO"))
    diff = subprocess.run([sys.executable, "-m", "fleetform", "diff", str(EXAMPLE), str(changed)],
                          capture_output=True, text=True)
    assert diff.returncode == 0, diff.stderr
    line = next(x for x in diff.stdout.splitlines() if "train/nccl.env:" in x)
    assert "every node installs it" not in line and "login pod" in line, line


def test_readme_says_what_diff_says_of_a_nodeset_change_and_why_no_job_runs_yet():
    """README's Slinky section must agree with fleetform/changes.py (a NodeSet change is a node roll, jobs finish on
    the old pods), not claim diff calls it an update in place; and it must say why the documented sbatch does not
    run yet: the login pod's shell is root and the controller's extraConf refuses root's jobs (DisableRootJobs)."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Slurm on Kubernetes (Slinky"):text.index("## Pools")]
    assert "an update in place" not in section and "node roll" in section
    assert "DisableRootJobs=YES" in section and "StorageClass" in section
    # the controller's claim has its class and the add-on that provisions it; the submit example does not run as root
    assert "aws-ebs-csi-driver" in section and "slinky-users" in section
    example = section[section.index("Submitting a job"):]
    assert example.index("su - ") < example.index("sbatch ")


def test_diff_says_a_nodeset_scale_in_can_end_jobs(tmp_path):
    """Fewer nodes: the operator drains only the slurmd pods it removes, but the smaller node group lets EKS terminate
    whichever instances its Auto Scaling group picks, and the jobs of the slurmd pods there end; diff must not say
    nothing running notices (it said so of the release's replicas and of the node group's size)."""
    fewer = tmp_path / "fewer.yaml"
    fewer.write_text(TEXT.replace("nodes: 4", "nodes: 2"))
    diff = subprocess.run([sys.executable, "-m", "fleetform", "diff", str(EXAMPLE), str(fewer)],
                          capture_output=True, text=True)
    assert diff.returncode == 0, diff.stderr
    assert "most disruptive: drain" in diff.stdout and "[drain] Release train-slurm: Slinky's NodeSet scales in" \
        in diff.stdout, diff.stdout
    more = tmp_path / "more.yaml"
    more.write_text(TEXT.replace("nodes: 4", "nodes: 6"))
    diff = subprocess.run([sys.executable, "-m", "fleetform", "diff", str(EXAMPLE), str(more)],
                          capture_output=True, text=True)
    assert "scales in" not in diff.stdout


def test_the_controllers_claim_names_an_encrypted_gp3_class_the_ebs_csi_add_on_provisions(tmp_path):
    """The chart's controller claims 4Gi for slurmctld's state and names no StorageClass; EKS >= 1.30 has no default
    one and fleetform installed no EBS provisioner, so the claim stayed Pending and slurmctld never started. The
    values name the fleet's own class (a key of the chart's values.yaml), the class is rendered before the release,
    and the cluster gets the aws-ebs-csi-driver add-on with AmazonEBSCSIDriverPolicy through its Pod Identity
    association on the controller's service account (EKS User Guide, "Amazon EBS CSI driver")."""
    model = _model(TEXT, tmp_path)
    files = render(model)
    values = yaml.safe_load(files["train/slinky/values.yaml"])
    assert "storageClassName" in CHART["controller"]["persistence"]
    (sc,) = [o for o in yaml.safe_load_all(files["train/k8s/storageclass.yaml"])]
    assert values["controller"]["persistence"] == {"storageClassName": sc["metadata"]["name"]}
    assert sc["provisioner"] == "ebs.csi.aws.com" and sc["parameters"] == {"type": "gp3", "encrypted": "true"}
    assert sc["volumeBindingMode"] == "WaitForFirstConsumer"  # an EBS volume is in one zone: the pod's
    kubernetes_validate.validate(sc, "1.33.0", strict=True)
    assert "storageclass.yaml" in yaml.safe_load(files["train/k8s/kustomization.yaml"])["resources"]
    assert "aws-ebs-csi-driver" in model.cluster.addons
    resources = record(model, files)
    by_name = {(r["type"], r["name"]): r for r in resources}
    addon = by_name[("aws:eks/addon:Addon", "eks-aws-ebs-csi-driver")]
    (association,) = addon["inputs"]["podIdentityAssociations"]
    assert association == {"roleArn": "arn:aws:mock:::role/eks-aws-ebs-csi-driver",
                           "serviceAccount": "ebs-csi-controller-sa"}
    assert "eks-eks-pod-identity-agent" in addon["depends_on"] and "eks-system" in addon["depends_on"]
    attached = [r["inputs"] for r in resources if "Attachment" in r["type"] and r["name"] == "eks-aws-ebs-csi-driver"]
    assert attached == [{"policyArn": "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy",
                         "role": "eks-aws-ebs-csi-driver"}]
    role = by_name[("aws:iam/role:Role", "eks-aws-ebs-csi-driver")]
    assert "pods.eks.amazonaws.com" in role["inputs"]["assumeRolePolicy"]
    release = by_name[(RELEASE, "train-slurm")]
    assert f"train-storageclass-{sc['metadata']['name']}" in release["depends_on"]
    # a cluster without a Slinky fleet gets no EBS driver it does not use
    reference = check(ROOT / "blueprints/reference.yaml").model
    assert "aws-ebs-csi-driver" not in reference.cluster.addons


NO_DIRECTORY = re.sub(r"      # the job users:.*\n(      #.*\n)*      directory:\n(        .*\n)+", "", TEXT)


def test_users_rule_says_no_job_runs_until_the_fleet_has_users(tmp_path):
    """The login pod's shell is root and DisableRootJobs=YES refuses root's jobs (kept: slurmd is privileged), and the
    chart's default sssd.conf (id_provider = proxy over files) knows no other user: a fleet without a directory
    validates with a warning naming what to configure, not silently; with one (the example) the warning is gone."""
    assert "directory:" not in NO_DIRECTORY and "directory:" in TEXT
    assert _rules(TEXT, tmp_path, "slinky-users") == []
    (message,) = _rules(NO_DIRECTORY, tmp_path, "slinky-users")
    assert "DisableRootJobs=YES" in message and "no job" in message
    (finding,) = [f for f in _check(NO_DIRECTORY, tmp_path).findings if f.rule == "slinky-users"]
    assert finding.severity == "warning" and "sssd" in finding.hint
    # slurm-operator v1.2.1 nodeset-cr.yaml gives the slurmd pods the sssd.conf only under ssh.enabled
    assert "nodesets.train.ssh.enabled: true" in finding.hint and "enabled" in CHART["nodesetDefaults"]["ssh"]
    assert "scheduler.directory" in finding.hint
    # without a directory the values are as before: the chart's default sssd, no ssh on the slurmd pods
    values = yaml.safe_load(render(_model(NO_DIRECTORY, tmp_path))["train/slinky/values.yaml"])
    assert "sssd" not in values and "ssh" not in values["nodesets"]["train"]
    assert "id_provider = proxy" in CHART["sssd"]["conf"]  # the default domain: the pod's own /etc/passwd


BIND_SNIPPET = "[domain/directory]\nldap_default_authtok = not-a-real-password\n"
"""What the example's bind_secret holds (README, Slurm on Kubernetes: `kubectl create secret`): the password line of
the domain fleetform renders, merged by sssd from /etc/sssd/conf.d (sssd.conf(5), configuration snippets)."""


def _sssctl(conf_text: str, folder, snippet: str | None = None):
    """The real `sssctl config-check` (Debian's sssd-tools) on an sssd.conf laid out as the pods have it: root-owned,
    mode 0600 (as slurm-operator mounts it, Mode 0o600), with a conf.d folder holding the bind snippet if any."""
    sssctl = require("sssctl", "sssd-tools")
    if os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("sssctl config-check wants sssd.conf owned by root, and CI runs as root")
        pytest.skip("sssctl config-check wants sssd.conf owned by root (CI runs as root)")
    (folder / "conf.d").mkdir(parents=True)
    conf = folder / "sssd.conf"
    conf.write_text(conf_text)
    conf.chmod(0o600)
    if snippet is not None:
        (folder / "conf.d/bind.conf").write_text(snippet)
        (folder / "conf.d/bind.conf").chmod(0o600)
    return subprocess.run([sssctl, "config-check", "-c", str(conf), "-s", str(folder / "conf.d")],
                          capture_output=True, text=True, timeout=60)


def test_the_rendered_sssd_conf_passes_the_real_sssctl_config_check_and_a_broken_key_fails_it(tmp_path):
    """sssctl config-check validates every section and option name against sssd's own rules (sssd 2.8.2 here;
    the slurmd and login images install Ubuntu 26.04's sssd, sssd-ldap and sssd-ad, SlinkyProject/containers
    schedmd/slurm/26.05/ubuntu26.04/Dockerfile) and merges conf.d snippets: the rendered sssd.conf and the bind
    snippet the README documents pass it; the same file with one misspelt key fails it. What it does not check (a
    provider's name, the URI's scheme, TLS) the slinky-directory rule does."""
    files = render(_model(TEXT, tmp_path))
    text = files["train/slinky/sssd.conf"].decode()
    values = yaml.safe_load(files["train/slinky/values.yaml"])
    # the chart's sssd.conf is the rendered file, less its comments
    assert values["sssd"]["conf"] == "".join(line + "\n" for line in text.splitlines() if not line.startswith("#"))
    # the snippet is what the README's command writes into the bind Secret
    readme = (ROOT / "README.md").read_text()
    (command,) = re.findall(r"read -rs PASSWORD && (printf .*\"\$PASSWORD\") \|", readme)
    made = subprocess.run(["bash", "-c", command], env={"PASSWORD": "not-a-real-password"}, capture_output=True,
                          text=True)
    assert made.stdout == BIND_SNIPPET, (command, made.stdout)
    good = _sssctl(text, tmp_path / "good", BIND_SNIPPET)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "Issues identified by validators: 0" in good.stdout and "Used configuration snippet files: 1" in good.stdout
    assert "not-a-real-password" not in text and "authtok =" not in text  # the password is in the snippet only
    broken = _sssctl(text.replace("ldap_search_base", "ldap_serch_base"), tmp_path / "broken")
    assert broken.returncode != 0 and "ldap_serch_base" in broken.stdout, broken.stdout
    misplaced = _sssctl(text, tmp_path / "snippet-typo", BIND_SNIPPET.replace("authtok", "authtokk"))
    assert misplaced.returncode != 0 and "ldap_default_authtokk" in misplaced.stdout, misplaced.stdout


def test_active_directory_without_posix_attributes_maps_ids_from_object_sids(tmp_path):
    """sssd's LDAP provider without ldap_id_mapping searches users with a non-zero uidNumber only (sssd
    src/providers/ldap/ldap_id.c users_get_send: "make sure there is a non-NULL UID"), so an Active Directory whose
    users have no POSIX attributes, the common case, has no user in the pods and no job runs. id_mapping: true
    renders ldap_id_mapping = true (sssd-ldap(5): uids and gids from objectSID, "supports only ActiveDirectory"),
    the same algorithm and settings in every pod, so the same uid in the login and slurmd pods; sssctl accepts it,
    and slinky-directory refuses it for a non-AD schema."""
    text = TEXT.replace("        schema: rfc2307bis\n", "        schema: ad\n        id_mapping: true\n")
    conf = render(_model(text, tmp_path))["train/slinky/sssd.conf"].decode()
    assert "ldap_schema = ad\nldap_id_mapping = true\n" in conf
    good = _sssctl(conf, tmp_path / "ad", BIND_SNIPPET)
    assert good.returncode == 0 and "Issues identified by validators: 0" in good.stdout, good.stdout + good.stderr
    assert "ldap_id_mapping" not in render(_model(TEXT, tmp_path))["train/slinky/sssd.conf"].decode()
    assert any("objectSID" in m for m in _directory(tmp_path, schema="rfc2307", id_mapping=True))
    assert _directory(tmp_path, schema="ad", id_mapping=True) == []


def test_login_and_slurmd_pods_read_the_same_directory(tmp_path):
    """slurm-operator v1.2.1 mounts the chart's one sssd.conf in the login pods and, with ssh.enabled, in the slurmd
    pods (loginset-cr.yaml sssdConfRef; nodeset-cr.yaml ssh.sssdConfRef; worker_app.go under Spec.Ssh.Enabled): the
    NodeSet enables ssh, and both containers mount the CA and the bind snippet at the paths sssd.conf names, from the
    objects the blueprint names, each file with the mode sssd wants. Every key is a key of the chart's values.yaml."""
    values = yaml.safe_load(render(_model(TEXT, tmp_path))["train/slinky/values.yaml"])
    assert _missing_keys(values, CHART) == []
    assert set(CHART["sssd"]) == {"conf", "secretRef"} and "volumeMounts" in CHART["loginsetDefaults"]["login"]
    assert "volumeMounts" in CHART["nodesetDefaults"]["slurmd"] and "volumes" in CHART["nodesetDefaults"]["podSpec"]
    nodeset, login = values["nodesets"]["train"], values["loginsets"]["train"]
    assert nodeset["ssh"] == {"enabled": True}
    conf = values["sssd"]["conf"]
    assert "ldap_tls_cacert = /etc/sssd/ldap-ca.crt" in conf and "ldap_uri = ldaps://ldap.corp.example.com" in conf
    # identities only: `su -` from the login pod's root shell asks no password, the pods' sshd takes none
    assert "id_provider = ldap\nauth_provider = none\n" in conf and "ldap_tls_reqcert = demand" in conf
    for mounts, volumes in ((login["login"]["volumeMounts"], login["podSpec"]["volumes"]),
                            (nodeset["slurmd"]["volumeMounts"], nodeset["podSpec"]["volumes"])):
        by_name = {v["name"]: v for v in volumes}
        files = {m["mountPath"]: (m, by_name[m["name"]]) for m in mounts if m["name"].startswith("sssd-")}
        mount, volume = files["/etc/sssd/ldap-ca.crt"]
        assert volume["configMap"] == {"name": "corp-ldap-ca", "items": [{"key": "ca.crt", "path": "ldap-ca.crt",
                                                                          "mode": 0o444}]}
        assert mount["subPath"] == "ldap-ca.crt" and mount["readOnly"] is True
        mount, volume = files["/etc/sssd/conf.d/bind.conf"]
        assert volume["secret"] == {"secretName": "corp-ldap-bind", "items": [{"key": "bind.conf", "path": "bind.conf",
                                                                               "mode": 0o600}]}
        assert mount["subPath"] == "bind.conf"
    # the chart's custom resources carry them and pass the CRD schemas (the NodeSet's ssh.sssdConfRef included)
    crs = _crs(values)
    assert crs["NodeSet"]["spec"]["ssh"]["sssdConfRef"] == crs["LoginSet"]["spec"]["sssdConfRef"]
    for kind, obj in crs.items():
        assert [e.message for e in jsonschema.Draft202012Validator(CRDS[kind]).iter_errors(obj)] == [], kind


def test_a_complete_sssd_conf_secret_is_the_charts_secret_ref(tmp_path):
    """sssd_secret: the chart takes the blueprint's Secret (sssd.secretRef, which takes precedence over sssd.conf and
    makes the chart create no Secret: cluster/sssd-conf-secret.yaml, _helpers.tpl slurm.sssdConf.name); fleetform
    renders no sssd.conf and mounts nothing of its own, the NodeSet still enables ssh so slurmd pods read it."""
    own = re.sub(r"      directory:\n(        .*\n)+", "      directory:\n        sssd_secret: {name: team-sssd}\n",
                 TEXT)
    result = _check(own, tmp_path)
    assert [f.rule for f in result.findings] == ["slinky-efa-image"]  # the example's chart image, as before
    files = render(result.model)
    values = yaml.safe_load(files["train/slinky/values.yaml"])
    assert values["sssd"] == {"secretRef": {"name": "team-sssd", "key": "sssd.conf"}}
    assert "train/slinky/sssd.conf" not in files and values["nodesets"]["train"]["ssh"] == {"enabled": True}
    assert not any(m["name"].startswith("sssd-") for m in values["loginsets"]["train"]["login"]["volumeMounts"])
    assert _crs(values)["LoginSet"]["spec"]["sssdConfRef"] == {"name": "team-sssd", "key": "sssd.conf"}


def _directory(tmp_path, **fields) -> list[str]:
    """slinky-directory's messages for the example with its directory's fields replaced (None: removed)."""
    d = {"uri": "ldaps://ldap.corp.example.com", "search_base": "dc=corp,dc=example,dc=com",
         "tls_ca": {"config_map": "corp-ldap-ca"}, "bind_dn": "cn=sssd,dc=corp,dc=example,dc=com",
         "bind_secret": {"name": "corp-ldap-bind"}}
    d.update(fields)
    body = "".join(f"        {k}: {yaml.safe_dump(v, default_flow_style=True).strip().removesuffix('...').strip()}\n"
                   for k, v in d.items() if v is not None)
    text = re.sub(r"      directory:\n(        .*\n)+", "      directory:\n" + body, TEXT)
    return _rules(text, tmp_path, "slinky-directory")


def test_directory_rule_refuses_a_bad_uri_plain_ldap_and_a_missing_search_base(tmp_path):
    assert _directory(tmp_path) == []
    assert _directory(tmp_path, uri="ldap://ldap.corp.example.com", start_tls=True) == []
    for uri in ("https://ldap.corp.example.com", "ldap.corp.example.com", "ldaps://", "ldaps://h/dc=x?uid",
                "ldaps://h:99999"):
        (found,) = _directory(tmp_path, uri=uri)
        assert "is not ldap://HOST[:PORT] or ldaps://HOST[:PORT]" in found, (uri, found)
    (found,) = _directory(tmp_path, uri="ldap://ldap.corp.example.com")
    assert "without StartTLS" in found and "in clear" in found
    (found,) = _directory(tmp_path, start_tls=True)
    assert "TLS already" in found
    (found,) = _directory(tmp_path, search_base=None)
    assert "no search_base" in found
    (found,) = _directory(tmp_path, search_base="corp")
    assert "not a DN" in found
    (found,) = _directory(tmp_path, tls_ca=None)
    assert "no tls_ca" in found
    (found,) = _directory(tmp_path, bind_secret=None)
    assert "without a password" in found
    (found,) = _directory(tmp_path, bind_dn=None)
    assert "no bind_dn" in found
    (found,) = _directory(tmp_path, uri=None)
    assert "has no uri" in found
    (found,) = _directory(tmp_path, sssd_secret={"name": "team-sssd"})
    assert "also uri, search_base, tls_ca, bind_dn, bind_secret" in found
    assert _directory(tmp_path, uri=None, search_base=None, tls_ca=None, bind_dn=None, bind_secret=None,
                      sssd_secret={"name": "team-sssd"}) == []


def test_schema_refuses_a_directory_value_that_would_inject_lines_or_a_directory_elsewhere(tmp_path):
    """A newline in a directory value would add a line to sssd.conf (and to the chart's values): the schema refuses
    control characters in every field; and only a Slinky fleet has a directory."""
    text = TEXT.replace("search_base: dc=corp,dc=example,dc=com",
                        'search_base: "dc=corp\\nldap_tls_reqcert = never"')
    result = _check(text, tmp_path)
    assert result.model is None and any(f.rule == "schema" and "search_base" in f.path for f in result.findings)
    text = TEXT.replace("uri: ldaps://ldap.corp.example.com", "uri: ldaps://a ldaps://b")
    assert any(f.rule == "schema" and "uri" in f.path for f in _check(text, tmp_path).findings)
    slurm = re.sub(r"    scheduler:\n(      .*\n)+", "    scheduler:\n      type: slurm\n      directory:\n"
                   "        sssd_secret: {name: x}\n", TEXT)
    assert any(f.rule == "schema" and "directory" in f.path for f in _check(slurm, tmp_path).findings)


def test_diff_calls_a_new_directory_a_node_roll(tmp_path):
    """A changed directory changes the chart's sssd.conf Secret, whose hash slurm-operator v1.2.1 puts on the NodeSet's
    and LoginSet's pod templates (workerbuilder/worker_app.go getWorkerHashes, loginbuilder/login_app.go
    getLoginHashes: AnnotationSssdConfHash): the slurmd pods roll like any NodeSet change, not an update in place, and
    the login pod is replaced, ending the users' kubectl exec shells in it; a NodeSet change alone leaves it."""
    changed = tmp_path / "directory.yaml"
    changed.write_text(TEXT.replace("ldaps://ldap.corp.example.com", "ldaps://ldap2.corp.example.com"))
    diff = subprocess.run([sys.executable, "-m", "fleetform", "diff", str(EXAMPLE), str(changed)],
                          capture_output=True, text=True)
    assert diff.returncode == 0, diff.stderr
    assert "[node roll] Release train-slurm: Slinky's NodeSet rolls its slurmd pods" in diff.stdout, diff.stdout
    line = next(x for x in diff.stdout.splitlines() if "Release train-slurm" in x)
    assert "login pod is replaced too" in line and "kubectl exec sessions) end" in line, line
    nodeset = tmp_path / "nodeset.yaml"
    nodeset.write_text(TEXT.replace("instance_type: p5.48xlarge", "instance_type: p5en.48xlarge"))
    diff = subprocess.run([sys.executable, "-m", "fleetform", "diff", str(EXAMPLE), str(nodeset)],
                          capture_output=True, text=True)
    line = next(x for x in diff.stdout.splitlines() if "Release train-slurm" in x)
    assert "node roll" in line and "login pod" not in line, line


IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/slurmd-efa"
DIGEST = "sha256:" + "ab" * 32


def _with_image(image: str) -> str:
    return TEXT.replace("      cluster_name: train\n", f"      cluster_name: train\n      slurmd_image: {image}\n")


def test_efa_image_rule_warns_while_efa_pods_run_the_charts_slurmd_image(tmp_path):
    """The chart's slurmd image has no libfabric of the EFA installer and no aws-ofi-nccl (SlinkyProject/containers
    schedmd/slurm/26.05/ubuntu26.04/Dockerfile), so NCCL in jobs of pods holding EFA interfaces uses sockets."""
    (finding,) = [f for f in _check(TEXT, tmp_path).findings if f.rule == "slinky-efa-image"]
    assert finding.severity == "warning" and "sockets" in finding.message and "32 EFA interfaces" in finding.message
    assert "FROM ghcr.io/slinkyproject/slurmd:26.05-ubuntu26.04" in finding.hint
    assert "aws-ofi-nccl" in finding.hint and "scheduler.slurmd_image" in finding.hint
    # the chart's default is what the rule names: the copy of its values.yaml says so
    default = CHART["nodesetDefaults"]["slurmd"]["image"]
    assert f"{default['repository']}:{default['tag']}" in finding.message
    # an image of the team's own: no warning; a fleet without EFA (TCP): no warning either
    assert _rules(_with_image(f"{IMAGE}:26.05-efa"), tmp_path, "slinky-efa-image") == []
    tcp = TEXT.replace("    placement: cluster\n", "    placement: cluster\n    interconnect: {fabric: tcp}\n")
    model = _model(tcp, tmp_path)
    assert model.fleets[0].slinky.efa == 0 and _run("slinky-efa-image", model) == []


@pytest.mark.parametrize("image, expected, pulled", [
    (f"{IMAGE}:26.05-efa", {"repository": IMAGE, "tag": "26.05-efa"}, f"{IMAGE}:26.05-efa"),
    (f"{IMAGE}@{DIGEST}", {"repository": IMAGE, "digest": DIGEST}, f"{IMAGE}@{DIGEST}"),
    (f"{IMAGE}:26.05-efa@{DIGEST}", {"repository": IMAGE, "tag": "26.05-efa", "digest": DIGEST}, f"{IMAGE}@{DIGEST}"),
    # no tag: :latest, written out (Helm would otherwise merge the chart's 26.05-ubuntu26.04 tag in)
    (IMAGE, {"repository": IMAGE, "tag": "latest"}, f"{IMAGE}:latest"),
])
def test_slurmd_image_is_the_nodesets_image_in_the_chart_values(tmp_path, image, expected, pulled):
    model = _model(_with_image(image), tmp_path)
    values = yaml.safe_load(render(model)["train/slinky/values.yaml"])
    assert values["nodesets"]["train"]["slurmd"]["image"] == expected
    assert _missing_keys(values, CHART) == []  # repository, tag, digest: keys of nodesetDefaults.slurmd.image
    # the NodeSet the chart makes of it runs that image (slurm.format-image), and passes the CRD's schema
    nodeset = _crs(values)["NodeSet"]
    assert nodeset["spec"]["slurmd"]["image"] == pulled
    assert list(jsonschema.Draft202012Validator(CRDS["NodeSet"]).iter_errors(nodeset)) == []
    pinned = [f for f in _check(_with_image(image), tmp_path).findings if f.rule == "image-pinned"]
    assert [f.path for f in pinned] == ([] if image != IMAGE else ["fleets[0].scheduler.slurmd_image"])


def test_without_slurmd_image_the_values_keep_the_charts_image(tmp_path):
    values = yaml.safe_load(render(_model(TEXT, tmp_path))["train/slinky/values.yaml"])
    assert "image" not in values["nodesets"]["train"]["slurmd"]
    assert _crs(values)["NodeSet"]["spec"]["slurmd"]["image"] == "ghcr.io/slinkyproject/slurmd:26.05-ubuntu26.04"


@pytest.mark.parametrize("scheduler", [
    "      type: slurm\n      slurm_version: \"24.11\"\n",
    "      type: kubernetes\n      version: \"1.35\"\n",
    "      type: ray\n      version: \"1.35\"\n",
])
def test_schema_refuses_slurmd_image_on_other_schedulers(tmp_path, scheduler):
    text = (ROOT / "blueprints/slurm-on-eks.yaml").read_text()
    start = text.index("    scheduler:\n") + len("    scheduler:\n")
    end = text.index("\n", text.index("      cluster_name: train\n")) + 1
    bad = text[:start] + scheduler + f"      slurmd_image: {IMAGE}:1\n" + text[end:]
    findings = _check(bad, tmp_path).findings
    assert any(f.rule == "schema" and f.path.endswith("slurmd_image") for f in findings), \
        [f.to_text() for f in findings]
    # the same key on slinky is allowed; a value that is no image reference is refused
    assert not [f for f in _check(_with_image(f"{IMAGE}:1"), tmp_path).findings if f.rule == "schema"]
    assert any(f.rule == "schema" for f in _check(_with_image("'Bad Image:1'"), tmp_path).findings)


def test_diff_calls_a_new_slurmd_image_a_node_roll_of_the_nodeset(tmp_path):
    """A changed image is a changed NodeSet spec: the operator rolls the slurmd pods (draining each Slurm node)."""
    changed = tmp_path / "changed.yaml"
    changed.write_text(_with_image(f"{IMAGE}:26.05-efa"))
    diff = subprocess.run([sys.executable, "-m", "fleetform", "diff", str(EXAMPLE), str(changed)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert "[node roll] Release train-slurm: Slinky's NodeSet rolls its slurmd pods" in diff.stdout, diff.stdout
    assert f'+        repository: "{IMAGE}"' in diff.stdout and '+        tag: "26.05-efa"' in diff.stdout
