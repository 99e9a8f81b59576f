"""What a deployed training fleet must do, as shell scripts run on its Slurm controller: by
tests/test_aws_e2e.py on a real cluster after `pulumi up` (through SSM Run Command), and by
tests/test_multihost.py on the test's own hosts (so the scripts themselves are tested here).

Each check is (name, script). A script runs as root on the controller with bash (as SSM Run
Command does), submits its jobs as E2E_USER (default `ubuntu`, the default AMI's user, with one
UID on every machine: Slurm refuses root's jobs, DisableRootJobs=YES), exits 0 when the check
holds, and prints what it saw. NODES is replaced by the number of nodes the check needs.
Add checks here (FSx, NCCL all-reduce over EFA): both tests pick them up; give one `needs` so the
multi-host test, which has no FSx and no GPUs, leaves it out.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Check:
    name: str
    script: str
    needs: tuple[str, ...] = ()  # what the multi-host test lacks: "fsx", "efa", "gpu"


PRELUDE = """set -euo pipefail
export SLURM_CONF=${SLURM_CONF:-/etc/slurm/slurm.conf}
cd /tmp
as_user() { runuser -u "${E2E_USER:-ubuntu}" -- env SLURM_CONF="$SLURM_CONF" "$@"; }
"""

CHECKS: tuple[Check, ...] = (
    Check("nodes-idle", PRELUDE + """
# static nodes boot, install, register: up to 30 minutes on AWS
deadline=$((SECONDS + ${E2E_IDLE_WAIT_S:-1800}))
until [ "$(sinfo -h -N -t idle -o %N | sort -u | wc -l)" -ge NODES ]; do
  if [ $SECONDS -gt $deadline ]; then sinfo -N; echo "fewer than NODES nodes idle"; exit 1; fi
  sleep 10
done
sinfo -N -h -o "%N %t"
"""),
    Check("srun-on-nodes", PRELUDE + """
# a job step on NODES nodes: each prints its hostname, which must be its Slurm node name
out=$(as_user timeout 600 srun -N NODES --ntasks-per-node=1 bash -c 'echo "$SLURMD_NODENAME $(hostname)"')
echo "$out"
[ "$(echo "$out" | wc -l)" -eq NODES ]
echo "$out" | awk '$1 != $2 {bad=1} END {exit bad}'
"""),
    Check("names-resolve-between-nodes", PRELUDE + """
# on every node of a NODES-node job, every node's short name resolves (the fleet's Route 53 zone,
# search domain), and a batch script's srun works on the batch host (slurm-client on the nodes)
as_user timeout 600 srun -N NODES --ntasks-per-node=1 bash -c '
  for n in $(scontrol show hostnames "$SLURM_JOB_NODELIST"); do
    getent hosts "$n" || { echo "$(hostname): $n does not resolve"; exit 1; }
  done'
"""),
    Check("job-cannot-reach-instance-metadata", PRELUDE + """
# a job's user gets no answer from instance metadata on any node (bin/imds-access: root only), so
# it can read neither the role's credentials nor, with them, the munge key
as_user timeout 600 srun -N NODES --ntasks-per-node=1 python3 -c '
import socket, sys
s = socket.socket()
s.settimeout(5)
try:
    s.connect(("169.254.169.254", 80))
except OSError as error:
    print(socket.gethostname(), "instance metadata refused:", error)
    sys.exit(0)
print(socket.gethostname(), "instance metadata answers a job user")
sys.exit(1)'
"""),
)


def script(check: Check, nodes: int) -> str:
    return check.script.replace("NODES", str(nodes))
