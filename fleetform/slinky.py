"""Slurm on Kubernetes: a training fleet scheduled by Slurm whose slurmctld and slurmd run as pods on the
blueprint's EKS cluster, through SchedMD's Slinky slurm-operator, as data.

Why Slinky and not Nebius' Soperator (both read at their newest tags, 2026-11-24):
- Slinky (github.com/SlinkyProject/slurm-operator, tag v1.2.1, 2026-07-30) is SchedMD's own: two Helm charts,
  `slurm-operator` (the operator, its webhook and, with crds.enabled, the slinky.slurm.net CRDs through its
  `slurm-operator-crds` dependency) and `slurm` (one Slurm cluster: Controller, NodeSet, LoginSet and RestApi
  custom resources plus the slurm and JWT key Secrets the chart generates). Its slurmd pods register as dynamic
  nodes (`slurmd -Z --conf '<NodeSet extraConf>'`, internal/builder/workerbuilder/worker_app.go) into
  `NodeSet=<name>` lines the operator writes (internal/builder/controllerbuilder/controller_config.go
  buildSlurmConf, buildNodeSetConf), and gres.conf is a plain `configFiles` entry: slurm.conf's nodes, GRES
  and partitions come from the same derivation as fleetform's Slurm fleets (fleetform/slurm.py node_facts).
- Soperator (github.com/nebius/soperator, VERSION 5.0.0 at its newest snapshot) turns one SlurmCluster resource
  into a cluster built around a "jail": a shared PVC mounted as every login and worker node's root (README.md),
  which on EKS needs a ReadWriteMany file system fleetform does not describe; it runs its own Slurm build
  (26.05.3-nebius), one partition only, and GPU-only clusters (docs/limitations.md); its terraform recipes are for
  Nebius only. GPU nodes there reported Gres=(null) when its GPU auto-detection named the GPU otherwise
  (nebius/soperator#1521). Slinky lets fleetform write gres.conf and the node line from its own model.

Known mismatches, each a finding of fleetform/rules/slinky.py:
- Gres=(null): a slurmd pod registers without GPUs when slurm.conf has no `GresTypes=gpu` or gres.conf names
  no GPU of its type (SlinkyProject/slurm-operator#57: the fix was `GresTypes: gpu` in the controller's
  extraConfMap, gres.conf, and `Gres: gpu:<type>:<n>` in the NodeSet's extraConfMap; #101: Gres=(null) with
  a gres.conf but no Gres in the NodeSet). fleetform writes all three from one model. (SlinkyProject/slurm-operator
  PR #191, closed, reports a first registration with Gres=(null) because the operator's `NodeSet=` line carries
  no Gres=; v1.2.1's buildNodeSetConf still writes none, and fleetform cannot change that line.)
- gres.conf's GPU type and count against the pod's `nvidia.com/gpu` limit: Slurm schedules the GPUs the
  NodeSet's `Gres=` claims, the kubelet gives the pod what its limit asks (slurm-operator#45: Gres=gpu:a40:1
  with 8 GPUs visible).
"""

from __future__ import annotations

import math

from .records import frozen

SLINKY_VERSION = "1.2.1"
"""The `slurm-operator` and `slurm` charts (oci://ghcr.io/slinkyproject/charts, README.md of tag v1.2.1) and the
CRD version the values are checked against: tagged v1.2.1 on 2026-07-30 (SlinkyProject/slurm-operator)."""
SLURM_VERSION = "26.05"
"""The Slurm release the `slurm` chart v1.2.1 runs (Chart.yaml appVersion; images ghcr.io/slinkyproject/
slurmctld:26.05-ubuntu26.04). The operator chart's annotation slinky.slurm.net/minimum-slurm-version is 25.11."""
MIN_SLURM_VERSION = "25.11"
DEFAULT_NAMESPACE = "slurm"
OPERATOR_NAMESPACE = "slinky"  # where providers/aws/addons.yaml installs the `slurm-operator` release
SLURM_USER = "slurm"  # common.SlurmUser (internal/builder/common/const.go)
SLURMCTLD_PORT = 6817  # common.SlurmctldPort
SLURMD_PORT = 6818  # helm/slurm/templates/nodeset/_helpers.tpl slurm.worker.port
STATE_DIR = "/var/spool/slurmctld"  # clusterSpoolDir (the controller's persistent volume)
SLURMD_SPOOL_DIR = "/var/spool/slurmd"  # common.SlurmdSpoolDir
LOG_DIR = "/var/log/slurm"  # common.SlurmctldLogFilePath, SlurmdLogFilePath
MAX_NODE_COUNT = 1024
"""buildSlurmConf: `MaxNodeCount=1024` ("A non-zero value is required."): the most dynamic nodes the cluster holds;
the slinky-size rule refuses a fleet of more nodes."""
POD_SHARE = 0.9
"""The slurmd pod asks 90% of a node's allocatable CPUs and memory (as a Ray worker or a JobSet pod does), leaving
the DaemonSets theirs; the cluster-admission rule checks that it fits a node of the group."""
GPU_RESOURCE = "nvidia.com/gpu"
EFA_RESOURCE = "vpc.amazonaws.com/efa"
HUGEPAGES_RESOURCE = "hugepages-2Mi"
EFA_HUGEPAGES = "5120Mi"  # as fleetform/kueue.py: what a pod using EFA asks of the EFA driver's huge pages
GPU_TAINT = ("nvidia.com/gpu", "present", "NoSchedule")  # as fleetform/k8s.py: the GPU Operator tolerates it
SYSTEM_SELECTOR = (("fleetform.dev/node-group", "system"),)
EBS_PROVISIONER = "ebs.csi.aws.com"
"""The EBS CSI driver's CSI name (kubernetes-sigs/aws-ebs-csi-driver docs/parameters.md, StorageClass
`provisioner`): the `aws-ebs-csi-driver` EKS add-on providers/aws/addons.yaml installs with a Slinky fleet."""
STATE_VOLUME = (("type", "gp3"), ("encrypted", "true"))
"""The StorageClass parameters of slurmctld's state volume (aws-ebs-csi-driver docs/parameters.md: `type` gp3,
`encrypted` "true": the account's default EBS key). The `slurm` chart 1.2.1 claims 4Gi ReadWriteOnce for it
(values.yaml controller.persistence) and names no class; EKS >= 1.30 has no default StorageClass, so without one
named the claim stays Pending and slurmctld never starts."""


SLURMD_IMAGE = "ghcr.io/slinkyproject/slurmd:26.05-ubuntu26.04"
"""The `slurm` chart v1.2.1's slurmd image (helm/slurm/values.yaml nodesets.slinky.slurmd.image). It installs no EFA
userspace and no NCCL net plugin (SlinkyProject/containers schedmd/slurm/26.05/ubuntu26.04/Dockerfile: the slurmd
stage adds Slurm's packages, openssh-server and sssd to a base-extra of Ubuntu's openmpi-bin; no EFA installer, no
aws-ofi-nccl), so NCCL in its jobs reaches EFA through nothing and uses TCP sockets: slinky-efa-image says so and
scheduler.slurmd_image names an image built FROM it with them. The chart renders the image object as
repository@digest where a digest is given, else repository:tag (helm/slurm/templates/_helpers.tpl slurm.format-image)."""

SSSD_DIR = "/etc/sssd"
"""Where sssd reads sssd.conf and its conf.d snippets: slurm-operator v1.2.1 mounts the chart's sssd.conf at
/etc/sssd/sssd.conf in the login and (with ssh.enabled) slurmd containers (loginbuilder/login_app.go SssdConfDir,
SssdConfFilePath; workerbuilder/worker_app.go), whose images run sssd under supervisord (SlinkyProject/containers
schedmd/slurm/26.05/ubuntu26.04: Dockerfile installs sssd, sssd-ldap, sssd-ad, libnss-sss, libpam-sss and
`authselect select sssd with-mkhomedir`; files/etc/supervisor/conf.d/sssd.conf runs `sssd -i`)."""
SSSD_DOMAIN = "directory"
"""The sssd domain fleetform renders: the section `[domain/directory]` a bind_secret's snippet adds its password to."""
SSSD_BIND_PATH = f"{SSSD_DIR}/conf.d/bind.conf"
"""Where the bind_secret's snippet is mounted: sssd merges /etc/sssd/conf.d/*.conf over sssd.conf (sssd.conf(5))."""
SSSD_FILE_MODE = 0o600
"""sssd reads sssd.conf and snippets only when owned by root with mode 0600 (sssd.conf(5); `sssctl config-check`
says "File ownership and permissions check failed. Expected root:root and 0600."): the operator mounts its sssd.conf
so (Mode 0o600), and fleetform mounts the snippet the same way."""
SSSD_FILTERED = "root,slurm"
"""The chart's [nss] filter_users and filter_groups (helm/slurm/values.yaml sssd.conf): root and the images' own slurm
user never come from the directory."""


@frozen
class SssdFile:
    """A file from a ConfigMap or Secret the blueprint names, mounted read-only into the login and slurmd containers
    with subPath (a plain file, as the operator mounts sssd.conf; a Secret volume's own files are symlinks)."""

    volume: str  # the volume's name in the pod
    kind: str  # configMap or secret
    source: str  # the ConfigMap's or Secret's name
    key: str
    file: str  # the path within the volume (items[].path) and the subPath
    mount_path: str
    mode: int


@frozen
class SlinkyMount:
    name: str  # the volume's name in the pod
    claim: str  # the PersistentVolumeClaim, named after the blueprint's storage entry
    mount_path: str


@frozen
class SlinkyConfig:
    namespace: str
    release: str  # the `slurm` chart's Helm release: the chart names its objects after it
    chart_version: str
    slurm_version: str
    cluster_name: str  # slurm.conf ClusterName
    controller_host: str  # slurm.conf SlurmctldHost: <release>-controller-0(<release>-controller.<namespace>)
    state_dir: str  # StateSaveLocation: /var/spool/slurmctld/<ClusterName> (controller_app.go clusterSpoolDir)
    nodeset: str  # the NodeSet's key in the chart's values: the Slurm NodeSet, feature and partition name
    replicas: int  # slurmd pods, one per node of the group
    max_node_count: int
    node_names: str  # the names slurmd pods register with: <nodeset>-0 .. <nodeset>-<replicas - 1>
    gpu_type: str
    gpus: int  # per pod: every GPU of a node, the nvidia.com/gpu limit
    gres: str  # the NodeSet's Gres=: gpu:<type>:<gpus>
    gres_types: tuple[str, ...]  # slurm.conf GresTypes (the controller's extraConf)
    gres_file: str  # gres.conf File=
    gres_type: str  # gres.conf Type=
    gres_devices: int  # how many devices gres.conf's File= names
    features: str
    cpus: int
    core_spec_count: int  # cores Slurm keeps from jobs: those past the pod's CPU limit (core_spec, below)
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    # the memory a slurmd pod registers with: RealMemory is the node's, as `slurmd -C` reports it in the pod (the host's
    # /proc/meminfo, not the cgroup's: the catalog's memory stands for it), MemSpecLimit the part past the pod's limit,
    # which the image's entrypoint appends (ENTRYPOINT_KEYS): jobs get RealMemory - MemSpecLimit = the pod's limit
    real_memory_mib: int
    mem_spec_limit_mib: int
    def_cpu_per_gpu: int
    def_mem_per_gpu_mib: int
    efa: int  # per pod: the node's EFA interfaces (0: TCP)
    hugepages: str | None
    cpu: str  # the slurmd pod's request and limit
    cpu_m: int
    memory: str
    memory_mib: int
    partition: str
    partition_config: str  # appended to the operator's PartitionName=<nodeset> Nodes=<nodeset> line
    node_labels: tuple[tuple[str, str], ...]
    node_taints: tuple[tuple[str, str, str], ...]
    system_selector: tuple[tuple[str, str], ...]  # controller, login and restapi pods: the system nodes
    env: tuple[tuple[str, str], ...]  # the fleet's NCCL environment, in the login pod: sbatch exports it to jobs
    mounts: tuple[SlinkyMount, ...]
    operator_namespace: str
    storage_class: str  # slurmctld's state claim (values controller.persistence.storageClassName)
    storage_provisioner: str
    storage_parameters: tuple[tuple[str, str], ...]
    # the job users (scheduler.directory): the sssd.conf fleetform renders (sections of key, value pairs; empty when
    # the blueprint names none or its own sssd_secret), the Secret of a complete sssd.conf, and the files mounted
    sssd_conf: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()
    sssd_secret: tuple[str, str] | None = None
    sssd_files: tuple[SssdFile, ...] = ()
    # the slurmd pods' image (scheduler.slurmd_image) as the chart's image object: repository, tag, digest ("" where
    # the reference has none); None: the chart's default, SLURMD_IMAGE
    slurmd_image: tuple[str, str, str] | None = None

    @property
    def users(self) -> bool:
        """Whether the login and slurmd pods know job users: an sssd.conf fleetform renders, or the user's own."""
        return bool(self.sssd_conf) or self.sssd_secret is not None

    @property
    def extra_conf(self) -> tuple[str, ...]:
        """The controller's extraConf lines: what fleetform's slurm.conf sets that the operator does not."""
        return (f"GresTypes={','.join(self.gres_types)}", "SelectType=select/cons_tres",
                "SelectTypeParameters=CR_Core_Memory", f"DefCpuPerGPU={self.def_cpu_per_gpu}",
                f"DefMemPerGPU={self.def_mem_per_gpu_mib}", "ReturnToService=2", "DisableRootJobs=YES")

    @property
    def job_cpus(self) -> int:
        """The CPUs Slurm gives jobs on a node: all but the specialized cores' threads."""
        return self.cpus - self.core_spec_count * self.threads_per_core

    @property
    def job_memory_mib(self) -> int:
        """The memory Slurm gives jobs on a node: RealMemory less MemSpecLimit, the pod's memory limit."""
        return self.real_memory_mib - self.mem_spec_limit_mib

    @property
    def node_conf(self) -> str:
        """The NodeSet's extraConf: slurmd's `--conf` (worker_app.go slurmdConfArgs adds Features=<nodeset>). It
        leaves RealMemory to `slurmd -C` and CoreSpecCount and MemSpecLimit to the image's entrypoint
        (ENTRYPOINT_KEYS), which appends them after these: given here too, slurmd would use the entrypoint's (the
        later) value, and with it a RealMemory of the pod's limit would lose the memory past it twice."""
        return (f"CPUs={self.cpus} Sockets={self.sockets} CoresPerSocket={self.cores_per_socket} "
                f"ThreadsPerCore={self.threads_per_core} Gres={self.gres} Features={self.features}")

    @property
    def entrypoint_conf(self) -> str:
        """What the slurmd image's entrypoint appends to the `--conf` of a node whose memory `slurmd -C` reports as
        real_memory_mib (core_spec, mem_spec): an item is appended only when its value is above 0."""
        return " ".join(f"{k}={v}" for k, v in (("CoreSpecCount", self.core_spec_count),
                                                  ("MemSpecLimit", self.mem_spec_limit_mib)) if v > 0)


ENTRYPOINT_KEYS = ("CoreSpecCount", "MemSpecLimit")
"""The node keys the slurmd image's entrypoint appends to slurmd's --conf, after the NodeSet's extraConf
(SlinkyProject/containers schedmd/slurm/26.05/ubuntu26.04 files/usr/local/bin/slurmd-entrypoint.sh main: addConfItem
puts `CoreSpecCount=` then `MemSpecLimit=` at the end of the --conf argument slurm-operator v1.2.1 builds,
workerbuilder/worker_app.go slurmdConfArgs). Slurm uses the later of two values of one key (parse_config.c
_handle_common: "specified more than once, latest value used"), so the entrypoint's win; fleetform's node line sets
neither (nor RealMemory, from which the entrypoint's MemSpecLimit is computed)."""


def mem_spec(host_mib: int, pod_memory_mib: int) -> int:
    """MemSpecLimit of a slurmd pod: the entrypoint's calculateMemSpecLimit, `slurmd -C`'s RealMemory less POD_MEMORY,
    the slurmd container's memory limit in MiB (worker_app.go getResourceLimits: Quantity.Value() / 1024 / 1024);
    not appended when 0 or less. `slurmd -C` reads the host's memory in the pod, not the cgroup's limit (measured with
    Debian's slurmd 22.05 in a 4 GiB memory cgroup), and the node registers with that RealMemory when --conf names
    none (slurmd(8) --conf: "override or define additional parameters" of what -C reports), so jobs get POD_MEMORY."""
    return max(0, host_mib - pod_memory_mib)


def core_spec(cpu_m: int, sockets: int, cores_per_socket: int, threads_per_core: int) -> int:
    """CoreSpecCount for a slurmd pod whose CPU limit is cpu_m millicores: the node's cores past the limit, which
    Slurm keeps from jobs. The node line cannot say fewer CPUs than sockets x cores x threads (slurm.conf CPUs: "the
    total number of sockets, cores or threads"), so the limit is expressed as specialized cores, as the slurmd image
    itself does: its entrypoint adds `CoreSpecCount=<cores - POD_CPUS / ThreadsPerCore>` to slurmd's --conf
    (SlinkyProject/containers schedmd/slurm/26.05/ubuntu26.04 files/usr/local/bin/slurmd-entrypoint.sh
    calculateCoreSpecCount), POD_CPUS being the slurmd container's CPU limit as slurm-operator v1.2.1 passes it
    (workerbuilder/worker_app.go getResourceLimits: Quantity.Value(), rounded up to a whole CPU), the cores those of
    `slurmd -C` (Boards x SocketsPerBoard x CoresPerSocket: the catalog's for an EC2 instance). The key is not in
    fleetform's node line: it is left to the entrypoint (ENTRYPOINT_KEYS), and this is the value it appends."""
    pod_cpus = math.ceil(cpu_m / 1000)
    return max(0, sockets * cores_per_socket - pod_cpus // threads_per_core)


def build(fleet, nccl_env=(), storage=()) -> SlinkyConfig | None:
    """The Slinky cluster of a training fleet scheduled by `slinky`; None when its scheduler, instance or size is
    unknown (a rule says why). nccl_env: the fleet's nccl.env variables; storage: the blueprint's storage."""
    from .cluster import cpu_reserved_m, memory_reserved_mib
    from .kueue import SCHEDULER_SPECIFIC
    from .slurm import gpu_defaults, gpu_files, node_facts

    scheduler, shape, instance, size = fleet.scheduler, fleet.shape, fleet.instance, fleet.nodes
    if scheduler is None or scheduler.type != "slinky" or shape is None or instance is None or size is None:
        return None
    if size.max < 1 or shape.sockets is None or shape.cores_per_socket is None or shape.threads_per_core is None:
        return None
    type_, features, cpus, _, mem_spec_slurm = node_facts(fleet)
    ident = fleet.cloud_name
    release = f"slurm-{ident}"  # contains the chart's name: the chart's fullname is the release name (_helpers.tpl)
    # whole CPUs: slurm-operator passes the limit rounded up as POD_CPUS (worker_app.go getResourceLimits,
    # Quantity.Value()) and the slurmd image's entrypoint specializes the cores past POD_CPUS (core_spec); with a
    # fractional limit the jobs would get up to a core more than the pod may use (g6e.12xlarge: 43029m, 44 CPUs)
    cpu_m = math.floor((instance.vcpus * 1000 - cpu_reserved_m(instance.vcpus)) * POD_SHARE) // 1000 * 1000
    memory_mib = math.floor((instance.mem_gib * 1024 - memory_reserved_mib()) * POD_SHARE)
    # the node registers with the host's memory (slurmd -C) and the entrypoint's MemSpecLimit keeps what is past the
    # pod's limit: jobs get the pod's memory. Before, the node line also said RealMemory=<the pod's limit>, and
    # the entrypoint's MemSpecLimit (host - pod) came off that again: a p5.48xlarge gave jobs 2 x pod - host,
    # 1,674,904 MiB, less than DefMemPerGPU x 8 = 1,844,080, so a job asking for every GPU never started
    host_mib = instance.mem_gib * 1024
    spec_mib = mem_spec(host_mib, memory_mib)
    # DefMemPerGPU shares the pod's memory less a Slurm fleet's MemSpecLimit (2% of the node, at least 2 GiB): the
    # pod's own slurmd, slurmstepd, sshd and sssd live under the same limit as its jobs
    job_memory = host_mib - spec_mib
    # as the memory, the CPUs jobs get are the pod's: DefCpuPerGPU shares those (of every CPU, a job asking for all
    # GPUs would ask for more CPUs than the node gives and never start)
    spec_cores = core_spec(cpu_m, shape.sockets, shape.cores_per_socket, shape.threads_per_core)
    def_cpu, def_mem = gpu_defaults(fleet, cpus - spec_cores * shape.threads_per_core, job_memory, mem_spec_slurm)
    efa = instance.max_efa if fleet.interconnect is not None and fleet.interconnect.fabric == "efa" else 0
    mounts = []
    for name in fleet.storage:
        entry = next((s for s in storage if s.name == name), None)
        if entry is not None and entry.type == "fsx-lustre" and entry.mount_path:
            mounts.append(SlinkyMount(f"fsx-{entry.name}", entry.name, entry.mount_path))
    replicas = size.max
    nodeset = ident
    sssd_conf, sssd_secret, sssd_files = sssd(scheduler.directory)
    return SlinkyConfig(
        namespace=scheduler.namespace, release=release, chart_version=SLINKY_VERSION, slurm_version=SLURM_VERSION,
        cluster_name=scheduler.cluster_name or fleet.name.replace("-", "_"),
        # api/v1beta1/controller_keys.go: PrimaryName <controller>-controller-0, ServiceFQDNShort <service>.<namespace>;
        # the chart names the Controller after the release (templates/controller/controller-cr.yaml)
        controller_host=f"{release}-controller-0({release}-controller.{scheduler.namespace})",
        state_dir=f"{STATE_DIR}/{scheduler.cluster_name or fleet.name.replace('-', '_')}", nodeset=nodeset, replicas=replicas,
        max_node_count=MAX_NODE_COUNT,
        node_names=f"{nodeset}-0" if replicas == 1 else f"{nodeset}-[0-{replicas - 1}]",
        gpu_type=type_, gpus=shape.gpu_count, gres=f"gpu:{type_}:{shape.gpu_count}", gres_types=("gpu",),
        gres_file=gpu_files(shape.gpu_count), gres_type=type_, gres_devices=shape.gpu_count,
        features=features, cpus=cpus, core_spec_count=spec_cores, sockets=shape.sockets,
        cores_per_socket=shape.cores_per_socket, threads_per_core=shape.threads_per_core, real_memory_mib=host_mib,
        mem_spec_limit_mib=spec_mib, def_cpu_per_gpu=def_cpu, def_mem_per_gpu_mib=def_mem,
        efa=efa, hugepages=EFA_HUGEPAGES if efa else None,
        cpu=f"{cpu_m}m", cpu_m=cpu_m, memory=f"{memory_mib}Mi", memory_mib=memory_mib,
        partition=nodeset, partition_config="Default=YES MaxTime=UNLIMITED State=UP",
        node_labels=(("fleetform.dev/fleet", ident), ("fleetform.dev/role", "training")),
        node_taints=(GPU_TAINT,), system_selector=SYSTEM_SELECTOR,
        # as a JobSet pod's (fleetform/kueue.py SCHEDULER_SPECIFIC): a pod's network namespace has its own interfaces
        env=tuple((v.name, v.value) for v in nccl_env if v.name not in SCHEDULER_SPECIFIC), mounts=tuple(mounts), operator_namespace=OPERATOR_NAMESPACE,
        # cluster-scoped: named after the release, which carries the fleet's name, so two fleets do not share one
        storage_class=f"{release}-state", storage_provisioner=EBS_PROVISIONER, storage_parameters=STATE_VOLUME,
        sssd_conf=sssd_conf, sssd_secret=sssd_secret, sssd_files=sssd_files,
        slurmd_image=slurmd_image(scheduler.slurmd_image),
    )


def slurmd_image(image: str | None) -> tuple[str, str, str] | None:
    """The chart's image object (repository, tag, digest) of scheduler.slurmd_image. A reference without tag or
    digest means :latest (distribution reference grammar); the tag is written then, since Helm merges the chart's own
    tag (26.05-ubuntu26.04) into an image object that has none and would pull that tag of the blueprint's repository."""
    from .rules.images import split_reference

    if not image:
        return None
    repository, tag, digest = split_reference(image)
    return repository, tag or ("" if digest else "latest"), digest


def sssd(directory) -> tuple[tuple, tuple[str, str] | None, tuple[SssdFile, ...]]:
    """The sssd.conf sections, the Secret of a complete sssd.conf, and the files to mount, of a scheduler.directory.

    The domain is sssd's LDAP provider (sssd-ldap(5)), which also reads Active Directory with `ldap_schema = ad`; the
    images' sssd has it (sssd-ldap; `id_provider = files` is not built by default from sssd 2.9.0 and removed in
    2.11.0, SSSD release notes, and the chart's default `id_provider = proxy` over the pod's /etc/passwd finds no
    user). TLS is demanded against the blueprint's CA: the
    bind password and the users' entries cross that channel.

    Identities only (`auth_provider = none`, sssd.conf(5) "disables authentication explicitly"): a job runs as the
    user `su -` switched to from the login pod's root shell (`kubectl exec`, guarded by Kubernetes RBAC), which asks
    no password; the login and slurmd pods' sshd (LoginSet, NodeSet ssh) then take no directory password from
    whatever pod reaches them.

    The bind password is never rendered: sssd reads `ldap_default_authtok` from a conf.d snippet (sssd.conf(5),
    "configuration snippets" merged from /etc/sssd/conf.d/*.conf) that the user's own Secret holds, mounted with mode
    0600 next to the chart's sssd.conf. Rendered files, values, the plan and Pulumi's state hold only its name."""
    if directory is None:
        return (), None, ()
    if directory.sssd_secret is not None:
        return (), directory.sssd_secret, ()
    if not directory.uri or not directory.search_base:  # slinky-directory says what is missing
        return (), None, ()
    domain = [("id_provider", "ldap"), ("auth_provider", "none"), ("ldap_uri", directory.uri),
              ("ldap_search_base", directory.search_base), ("ldap_schema", directory.schema),
              *((("ldap_id_mapping", "true"),) if directory.id_mapping else ()),
              ("ldap_tls_reqcert", "demand")]
    files = []
    if directory.start_tls:
        domain.append(("ldap_id_use_start_tls", "true"))
    if directory.tls_ca is not None:
        name, key = directory.tls_ca
        files.append(SssdFile("sssd-ldap-ca", "configMap", name, key, "ldap-ca.crt", f"{SSSD_DIR}/ldap-ca.crt", 0o444))
        domain.append(("ldap_tls_cacert", f"{SSSD_DIR}/ldap-ca.crt"))
    if directory.bind_dn is not None:
        domain += [("ldap_default_bind_dn", directory.bind_dn), ("ldap_default_authtok_type", "password")]
    if directory.bind_secret is not None:
        name, key = directory.bind_secret
        files.append(SssdFile("sssd-bind", "secret", name, key, "bind.conf", SSSD_BIND_PATH,
                              SSSD_FILE_MODE))
    sections = (("sssd", (("services", "nss, pam"), ("domains", SSSD_DOMAIN))),
                ("nss", (("filter_groups", SSSD_FILTERED), ("filter_users", SSSD_FILTERED))),
                ("pam", ()),
                (f"domain/{SSSD_DOMAIN}", tuple(domain)))
    return sections, None, tuple(files)


def node_group(fleet):
    """The fleet's EKS node group as the cluster rules see it: tainted and labelled as a Kueue training group, GPUs
    and EFA interfaces per node (providers/aws/slinky.py builds it with EFA interfaces in a placement group)."""
    from .cluster import (ACCELERATOR_LABEL, EVICTION_NODEFS, ROOT_GIB, NodeGroup, _well_known, accelerator,
                          cpu_reserved_m, gfd_product, memory_reserved_mib)

    s, instance = fleet.slinky, fleet.instance
    devices = ((GPU_RESOURCE, instance.gpu_count),) + (((EFA_RESOURCE, instance.max_efa),) if s.efa else ())
    return NodeGroup(
        fleet.name, fleet.name, instance.name, fleet.nodes.min, fleet.nodes.max,
        s.node_labels + ((ACCELERATOR_LABEL, accelerator(fleet)),),
        (("nvidia.com/gpu.product", gfd_product(fleet)),) + _well_known(instance.name, fleet.capacity_type),
        s.node_taints, instance.vcpus * 1000 - cpu_reserved_m(instance.vcpus),
        instance.mem_gib * 1024 - memory_reserved_mib(), math.floor(ROOT_GIB * (1 - EVICTION_NODEFS)),
        devices, fleet.capacity_type, fleet.reservation_id, False, fleet.path)


def workloads(fleet):
    """The slurmd pods as the cluster rules see them: one per GPU node, every GPU and EFA interface of it. One
    replica stands for all: each pod takes a node of its own, so one that fits a node is the whole check."""
    from .cluster import Toleration, Workload

    s = fleet.slinky
    devices = ((GPU_RESOURCE, s.gpus),) + (((EFA_RESOURCE, s.efa),) if s.efa else ())
    return [Workload(f"{fleet.name}/{s.release}-worker-{s.nodeset}", f"fleet {fleet.name}", "NodeSet", 1, 1,
                     s.cpu_m, s.memory_mib, 0, devices, s.node_labels,
                     tuple(Toleration(k, "Equal", e) for k, _, e in s.node_taints), fleet.name, fleet.scheduler.path)]
