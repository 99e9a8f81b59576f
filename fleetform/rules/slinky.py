"""Rules of training fleets scheduled by Slurm on EKS through Slinky (fleetform/slinky.py): the fleet runs where the
operator does, its size fits the operator's slurm.conf, and the known mismatches of Slurm-on-Kubernetes operators
(GPU GRES reported as null; gres.conf types and counts against the pod's `nvidia.com/gpu` limit; a node
registering more or less memory than the pod has) are found in the derived configuration before a cluster shows them."""

from __future__ import annotations

from ..model import Blueprint
from . import Reporter, rule


def _slinky_fleets(bp: Blueprint):
    return [f for f in bp.fleets if f.scheduler is not None and f.scheduler.type == "slinky"]


@rule("slinky-placement", "error", "a Slinky fleet runs on the blueprint's EKS cluster, on AWS")
def slinky_placement(bp: Blueprint, report: Reporter) -> None:
    for fleet in _slinky_fleets(bp):  # an inference fleet scheduled by slinky: role-scheduler says so
        if bp.cloud != "aws":
            report(fleet.scheduler.path + ("type",), "Slinky fleets run as slurmd pods on the blueprint's EKS "
                   "cluster, which on-premises blueprints do not have", "schedule on-prem training with slurm")


@rule("slinky-size", "error", "a Slinky fleet has a fixed node count within the operator's MaxNodeCount")
def slinky_size(bp: Blueprint, report: Reporter) -> None:
    """The NodeSet runs a fixed number of slurmd pods (fleetform sets nodes.max) and slurm-operator v1.2.1 writes
    `MaxNodeCount=1024` into slurm.conf (controller_config.go buildSlurmConf): more dynamic nodes do not register.
    A range of nodes would keep nodes.max GPU nodes up anyway, and nothing would scale the NodeSet to the rest."""
    from ..slinky import MAX_NODE_COUNT

    for fleet in _slinky_fleets(bp):
        nodes = fleet.nodes
        if nodes is None:
            continue
        if nodes.min != nodes.max:
            report(nodes.path, f"Slinky fleet '{fleet.name}' scales from {nodes.min} to {nodes.max} nodes, but its "
                   f"NodeSet runs a fixed number of slurmd pods: all {nodes.max} GPU nodes would stay up",
                   f"give it a fixed count: nodes: {nodes.max}")
        if nodes.max > MAX_NODE_COUNT:
            report(nodes.path, f"Slinky fleet '{fleet.name}' has {nodes.max} nodes, but slurm-operator's slurm.conf "
                   f"holds at most MaxNodeCount={MAX_NODE_COUNT} dynamic nodes",
                   f"at most {MAX_NODE_COUNT} nodes, or schedule the fleet with slurm")


@rule("slinky-gres", "error", "a Slinky NodeSet's GPUs agree: GresTypes, gres.conf, the node's Gres= and the pod's "
      "nvidia.com/gpu limit", stage="config")
def slinky_gres(bp: Blueprint, report: Reporter) -> None:
    """The Gres=(null) reports of Slurm-on-Kubernetes operators: a slurmd pod registers without GPUs when slurm.conf
    lacks GresTypes=gpu or gres.conf names no GPU of the node's type (SlinkyProject/slurm-operator#57, #101;
    nebius/soperator#1521, where auto-detection gave another type name), and Slurm hands out GPUs the pod does not
    have when the node's Gres= count differs from its nvidia.com/gpu limit (slurm-operator#45). fleetform derives all
    of them from one instance (fleetform/slinky.py); this guards that derivation."""
    for fleet in _slinky_fleets(bp):
        s, shape = fleet.slinky, fleet.shape
        if s is None or shape is None:
            continue
        path = fleet.scheduler.path
        if "gpu" not in s.gres_types:
            report(path, f"Slinky fleet '{fleet.name}''s slurm.conf has no GresTypes=gpu: its slurmd pods would "
                   "register with Gres=(null) (slurm-operator#57)", "report this: fleetform writes GresTypes=gpu")
        kind, _, rest = s.gres.partition(":")
        gres_type, _, count = rest.partition(":")
        if kind != "gpu" or gres_type != s.gres_type:
            report(path, f"Slinky fleet '{fleet.name}''s NodeSet says Gres={s.gres}, but gres.conf names GPUs of "
                   f"type '{s.gres_type}': the node would register with Gres=(null) (slurm-operator#101)",
                   "report this: the NodeSet's Gres= and gres.conf come from one GPU type")
        if not count.isdigit() or int(count) != s.gres_devices or s.gpus != s.gres_devices \
                or s.gpus != shape.gpu_count:
            report(path, f"Slinky fleet '{fleet.name}': Gres={s.gres}, gres.conf {s.gres_devices} devices "
                   f"({s.gres_file}) and the pod's nvidia.com/gpu limit {s.gpus} differ (a {fleet.instance_type} "
                   f"has {shape.gpu_count}): Slurm would hand out GPUs the pod does not have (slurm-operator#45)",
                   "report this: one slurmd pod per node with every GPU")


@rule("slinky-memory", "error", "a Slinky node gives jobs its slurmd pod's memory limit, no more and no less, and a "
      "job asking for every GPU gets its default memory", stage="config")
def slinky_memory(bp: Blueprint, report: Reporter) -> None:
    """Slurm allots jobs RealMemory less MemSpecLimit; the kubelet kills the slurmd pod, and every job on it, past the
    pod's memory limit. The node registers with the host's RealMemory (`slurmd -C` in the pod) and the slurmd image's
    entrypoint appends MemSpecLimit = that - POD_MEMORY after the NodeSet's extraConf, where the later value wins
    (fleetform/slinky.py ENTRYPOINT_KEYS, mem_spec): a RealMemory or MemSpecLimit in fleetform's node line would lose
    the memory past the limit twice (RealMemory=<the pod's limit> gave a p5.48xlarge's jobs 2 x pod - host), and then
    DefMemPerGPU x GPUs, asked by a job for every GPU, is more than any node has."""
    from ..cluster import quantity
    from ..slinky import ENTRYPOINT_KEYS

    for fleet in _slinky_fleets(bp):
        s = fleet.slinky
        if s is None:
            continue
        limit_mib = int(quantity(s.memory)) // 2**20  # POD_MEMORY: worker_app.go getResourceLimits, / 1024 / 1024
        given = [k for k in ("RealMemory",) + ENTRYPOINT_KEYS
                 if any(item.split("=", 1)[0].lower() == k.lower() for item in s.node_conf.split())]
        if given:
            report(fleet.scheduler.path, f"Slinky fleet '{fleet.name}''s node line sets {', '.join(given)}, which "
                   "the slurmd image's entrypoint sets after it (RealMemory from slurmd -C, CoreSpecCount and "
                   "MemSpecLimit from the pod's limits): slurmd would use the entrypoint's values",
                   "report this: the node line leaves those keys to the entrypoint")
        if s.job_memory_mib != limit_mib or s.mem_spec_limit_mib < 0:
            report(fleet.scheduler.path, f"Slinky fleet '{fleet.name}''s node registers RealMemory="
                   f"{s.real_memory_mib} MemSpecLimit={s.mem_spec_limit_mib}: {s.job_memory_mib} MiB for jobs, but "
                   f"its slurmd pod's memory limit is {s.memory} ({limit_mib} MiB): jobs would "
                   + ("be OOM-killed with the pod" if s.job_memory_mib > limit_mib else "get less than the pod has"),
                   "report this: MemSpecLimit is the host's memory less the pod's limit")
        elif not 1 <= s.def_mem_per_gpu_mib * s.gpus <= s.job_memory_mib:
            report(fleet.scheduler.path, f"Slinky fleet '{fleet.name}': DefMemPerGPU={s.def_mem_per_gpu_mib} x "
                   f"{s.gpus} GPUs is not within the {s.job_memory_mib} MiB a node gives jobs: a job asking for every "
                   "GPU would never start", "report this: DefMemPerGPU shares the pod's memory")


@rule("slinky-cpus", "error", "a Slinky node gives jobs at most its slurmd pod's CPU limit, and a job asking for every "
      "GPU gets its default CPUs", stage="config")
def slinky_cpus(bp: Blueprint, report: Reporter) -> None:
    """The kubelet's CFS quota holds the slurmd pod, and every job step in it, to its CPU limit; Slurm would place
    tasks on every CPU of the node line. The cores past the limit are specialized (CoreSpecCount, which the slurmd
    image's entrypoint appends from POD_CPUS: fleetform/slinky.py core_spec; slinky-memory
    refuses it in fleetform's node line), and DefCpuPerGPU shares the CPUs left: more than
    those, and a job asking for all of a node's GPUs without --cpus-per-task asks for more CPUs than any node has."""
    for fleet in _slinky_fleets(bp):
        s = fleet.slinky
        if s is None:
            continue
        cores = s.sockets * s.cores_per_socket
        entrypoint = max(0, cores - -(-s.cpu_m // 1000) // s.threads_per_core)  # POD_CPUS: the limit rounded up
        if s.job_cpus > s.cpu_m / 1000 or not 0 <= s.core_spec_count < cores or s.core_spec_count != entrypoint:
            report(fleet.scheduler.path, f"Slinky fleet '{fleet.name}''s node line gives jobs {s.job_cpus} CPUs "
                   f"(CPUs={s.cpus}, CoreSpecCount={s.core_spec_count} of {cores} cores), but its slurmd pod's CPU "
                   f"limit is {s.cpu}: jobs would be throttled below what Slurm allotted them",
                   "report this: the cores past the pod's limit are specialized")
        elif s.def_cpu_per_gpu * s.gpus > s.job_cpus:
            report(fleet.scheduler.path, f"Slinky fleet '{fleet.name}': DefCpuPerGPU={s.def_cpu_per_gpu} x {s.gpus} "
                   f"GPUs is more than the {s.job_cpus} CPUs a node gives jobs: a job asking for every GPU would "
                   "never start", "report this: DefCpuPerGPU shares the CPUs jobs get")


@rule("slinky-namespace", "error", "a Slinky fleet's namespace is its own: not Kubernetes', a chart's or another fleet's")
def slinky_namespace(bp: Blueprint, report: Reporter) -> None:
    """fleetform makes the fleet's Namespace (<fleet>/k8s/namespace.yaml) and installs its `slurm` release there:
    removing the fleet deletes the namespace with everything in it (a chart's pods, another fleet's), and the API
    server refuses to delete default, kube-system and kube-public, which would leave the fleet half gone."""
    from ..cluster import addons_data
    from .kueue import RESERVED_NAMESPACES

    if bp.cloud != "aws":  # slinky-placement says so
        return
    taken = {chart["namespace"]: f"the {name} release's" for name, chart in addons_data()["charts"].items()}
    taken.update({ns: "Kubernetes' own" for ns in RESERVED_NAMESPACES})
    for fleet in _slinky_fleets(bp):
        namespace = fleet.scheduler.namespace
        others = [f.name for f in bp.fleets if f is not fleet and getattr(f.scheduler, "namespace", None) == namespace]
        why = taken.get(namespace) or (f"fleet '{others[0]}''s too" if others else None)
        if why is not None:
            report(fleet.scheduler.path + ("namespace",), f"namespace '{namespace}' of Slinky fleet '{fleet.name}' is "
                   f"{why}: fleetform makes and deletes it with the fleet", "give the fleet a namespace of its own")


@rule("slinky-users", "warning", "a Slinky fleet has users its jobs can run as (DisableRootJobs=YES refuses root)")
def slinky_users(bp: Blueprint, report: Reporter) -> None:
    """No job of a Slinky fleet can run as rendered: `kubectl exec` into the login pod gives root, and the controller's
    extraConf has DisableRootJobs=YES (kept: slurmd runs privileged, so a root job would be root on the GPU node).
    A job user must resolve to the same uid and gid on the login pod and every slurmd pod. slurm-operator v1.2.1 gives
    the login pods the one sssd.conf of the `slurm` chart's `sssd` values (helm/slurm/templates/loginset/loginset-cr.yaml
    sssdConfRef), and the slurmd pods the same one only when the NodeSet's `ssh.enabled` is true (nodeset-cr.yaml sets
    ssh.sssdConfRef inside `if .enabled`; workerbuilder/worker_app.go mounts it under Spec.Ssh.Enabled). Its default
    domain is `id_provider = proxy` over the pod's own /etc/passwd (values.yaml sssd.conf), which holds no user: users
    come from a directory (LDAP, AD): scheduler.directory names it (fleetform/slinky.py renders sssd.conf of it and
    enables the NodeSet's ssh), and until it does, the finding says what to set."""
    for fleet in _slinky_fleets(bp):
        s = fleet.slinky
        if s is None or "DisableRootJobs=YES" not in s.extra_conf or s.users:
            continue
        report(fleet.scheduler.path, f"no job of Slinky fleet '{fleet.name}' can run yet: its login pod's shell is "
               f"root and slurm.conf has DisableRootJobs=YES, and neither the login pod nor the slurmd pods know "
               f"another user",
               f"name the users' directory in scheduler.directory (uri, search_base, tls_ca, bind_dn, bind_secret; "
               f"or sssd_secret, a Secret holding a complete sssd.conf); by hand, "
               f"give the `slurm` release (values of {fleet.name}/slinky/values.yaml) an `sssd.conf` or "
               f"`sssd.secretRef` whose domain is a directory (LDAP or AD) holding the job users, and "
               f"`nodesets.{s.nodeset}.ssh.enabled: true` so the slurmd pods read it too (same uid and gid on the "
               f"login and slurmd pods); submit as one of them (`su - USER` in the login pod)")


@rule("slinky-directory", "error", "a Slinky fleet's user directory is complete and reached over TLS: an ldaps:// or "
      "StartTLS ldap:// URI, a search base, the CA, a bind DN with its Secret; or a complete sssd.conf's Secret alone")
def slinky_directory(bp: Blueprint, report: Reporter) -> None:
    """scheduler.directory becomes the sssd.conf of the login and slurmd pods (fleetform/slinky.py). sssd-ldap(5):
    ldap_uri is `ldap[s]://<host>[:port]`; "an encrypted channel is not needed" only for identities, but the bind
    password crosses the same channel, so ldap:// without StartTLS (ldap_id_use_start_tls) would send it and every
    user's entry in clear, where anyone on the path could also answer with other uids; StartTLS on ldaps:// would
    ask for TLS inside TLS. Without ldap_search_base sssd searches the RootDSE's defaultNamingContext or single
    namingContexts value (sssd-ldap(5)), which need not hold the users. ldap_tls_reqcert = demand checks the
    server's certificate against ldap_tls_cacert, the blueprint's CA. A bind DN without its password's Secret would
    bind with an empty password (refused), a Secret without a DN would be ignored."""
    from urllib.parse import urlsplit

    for fleet in _slinky_fleets(bp):
        d = fleet.scheduler.directory
        if d is None:
            continue
        if d.sssd_secret is not None:
            given = [k for k, v in (("uri", d.uri), ("search_base", d.search_base), ("tls_ca", d.tls_ca),
                                    ("bind_dn", d.bind_dn), ("bind_secret", d.bind_secret)) if v is not None]
            given += ["id_mapping"] if d.id_mapping else []
            if given or d.start_tls:
                report(d.path + ("sssd_secret",), f"Slinky fleet '{fleet.name}''s directory names a complete sssd.conf "
                       f"(Secret '{d.sssd_secret[0]}') and also {', '.join(given or ['start_tls'])}, which fleetform "
                       "would not use", "keep sssd_secret alone, or drop it and let fleetform render sssd.conf")
            continue
        if d.uri is None:
            report(d.path, f"Slinky fleet '{fleet.name}''s directory has no uri: sssd would not know the directory "
                   "server", "add uri: ldaps://HOST (or sssd_secret: {name: SECRET} with a complete sssd.conf)")
        else:
            try:
                parts = urlsplit(d.uri)
                port = parts.port
            except ValueError:
                parts, port = None, None
            scheme = parts.scheme.lower() if parts is not None else ""
            if parts is None or scheme not in ("ldap", "ldaps") or not parts.hostname or parts.path not in ("", "/") \
                    or parts.query or parts.fragment or parts.username or (port is not None and not 0 < port < 65536):
                report(d.path + ("uri",), f"Slinky fleet '{fleet.name}''s directory uri '{d.uri}' is not "
                       "ldap://HOST[:PORT] or ldaps://HOST[:PORT] (sssd-ldap(5) ldap_uri)",
                       "write ldaps://ldap.example.com, or ldap://ldap.example.com with start_tls: true")
            elif scheme == "ldap" and not d.start_tls:
                report(d.path + ("uri",), f"Slinky fleet '{fleet.name}''s directory uri '{d.uri}' is plain LDAP "
                       "without StartTLS: the bind password and every user's entry (uids, groups) would cross the "
                       "network in clear, and could be forged on the way",
                       "use ldaps://, or add start_tls: true")
            elif scheme == "ldaps" and d.start_tls:
                report(d.path + ("start_tls",), f"Slinky fleet '{fleet.name}''s directory asks for StartTLS on "
                       f"'{d.uri}', which is TLS already: sssd would ask for TLS inside TLS and fail to connect",
                       "drop start_tls (it is for ldap:// URIs)")
        if not d.search_base or not d.search_base.strip():
            report(d.path, f"Slinky fleet '{fleet.name}''s directory has no search_base: sssd would search the "
                   "server's default naming context, which need not hold the job users",
                   "add search_base: the DN above the users and groups, e.g. dc=example,dc=com")
        elif "=" not in d.search_base:
            report(d.path + ("search_base",), f"Slinky fleet '{fleet.name}''s directory search_base "
                   f"'{d.search_base}' is not a DN (attribute=value pairs)", "write it as dc=example,dc=com")
        if d.id_mapping and d.schema != "ad":
            report(d.path + ("id_mapping",), f"Slinky fleet '{fleet.name}''s directory maps ids from objectSIDs "
                   f"(id_mapping) on a '{d.schema}' directory: sssd's ldap_id_mapping supports only Active Directory "
                   "objectSID mapping (sssd-ldap(5))", "drop id_mapping, or set schema: ad")
        if d.tls_ca is None:
            report(d.path, f"Slinky fleet '{fleet.name}''s directory names no tls_ca: sssd demands a certificate it "
                   "can verify (ldap_tls_reqcert = demand) and the pods hold no CA of yours",
                   "add tls_ca: {config_map: NAME} (a ConfigMap in the fleet's namespace with key ca.crt)")
        if d.bind_dn is not None and d.bind_secret is None:
            report(d.path + ("bind_dn",), f"Slinky fleet '{fleet.name}''s directory binds as '{d.bind_dn}' but names "
                   "no bind_secret: sssd would bind without a password", "add bind_secret: {name: SECRET} (README, "
                   "Slurm on Kubernetes), or drop bind_dn for an anonymous bind")
        if d.bind_secret is not None and d.bind_dn is None:
            report(d.path + ("bind_secret",), f"Slinky fleet '{fleet.name}''s directory names bind_secret "
                   f"'{d.bind_secret[0]}' but no bind_dn: sssd would bind anonymously and ignore the password",
                   "add bind_dn: the DN the password belongs to")


@rule("slinky-efa-image", "warning", "a Slinky fleet whose slurmd pods get EFA interfaces runs a slurmd image with "
      "libfabric and aws-ofi-nccl")
def slinky_efa_image(bp: Blueprint, report: Reporter) -> None:
    """NCCL reaches EFA only through the aws-ofi-nccl net plugin over libfabric's efa provider, both inside the
    container its job runs in; without them it falls back to TCP sockets, silently, although every slurmd pod holds
    the node's vpc.amazonaws.com/efa interfaces. A Slinky job runs in the slurmd container, and the `slurm` chart's
    slurmd image (fleetform/slinky.py SLURMD_IMAGE) installs neither the EFA installer nor aws-ofi-nccl
    (SlinkyProject/containers schedmd/slurm/26.05/ubuntu26.04/Dockerfile). An image built FROM it keeps what the
    operator relies on: its entrypoint (which appends CoreSpecCount and MemSpecLimit to slurmd's --conf), sssd and
    supervisord. The EFA installer (aws-efa-installer README: libfabric under /opt/amazon/efa; in an image build
    `--skip-kmod` "Do not install the EFA kernel module while installing user-space packages", the module being the
    host's, `--skip-limit-conf` and `--no-verify`, the build host having no EFA) and aws-ofi-nccl (its README: NCCL loads libnccl-net-ofi.so from LD_LIBRARY_PATH;
    /opt/amazon/ofi-nccl/lib where the installer puts it) are what AWS's own containers add (aws/deep-learning-
    containers: install_efa.sh)."""
    for fleet in _slinky_fleets(bp):
        s = fleet.slinky
        if s is None or not s.efa or s.slurmd_image is not None:
            continue
        from ..slinky import SLURMD_IMAGE

        report(fleet.scheduler.path, f"Slinky fleet '{fleet.name}''s slurmd pods get {s.efa} EFA interfaces each, but "
               f"run the chart's {SLURMD_IMAGE}, which has no EFA installer's libfabric and no aws-ofi-nccl: NCCL in "
               f"its jobs falls back to TCP sockets between the nodes",
               f"build an image FROM {SLURMD_IMAGE} (keep its entrypoint, sssd and supervisord: the operator relies on "
               "them) that runs the EFA installer (efa_installer.sh -y --skip-kmod --skip-limit-conf --no-verify: "
               "aws-efa-installer README) and installs aws-ofi-nccl (its README; /opt/amazon/ofi-nccl/lib "
               "on LD_LIBRARY_PATH), push it to a registry the nodes pull from, and set scheduler.slurmd_image")
