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
    Check("fsx-writable-at-checkpoint-path", PRELUDE + """
# the fleet's FSx for Lustre is mounted on every node and a job's user can write its checkpoint
# path there (the controller makes it 1777); E2E_CHECKPOINT_DIR is the blueprint's checkpoint.path
dir=${E2E_CHECKPOINT_DIR:-/fsx/checkpoints}
as_user timeout 600 srun -N NODES --ntasks-per-node=1 bash -c '
  set -e
  fs=$(stat -f -c %T "$0")
  [ "$fs" = lustre ] || { echo "$(hostname): $0 is on $fs, not Lustre"; exit 1; }
  f="$0/.fleetform-e2e-$(hostname)-$$"
  echo ok > "$f" && [ "$(cat "$f")" = ok ] && rm "$f"
  echo "$(hostname): $0 on lustre, writable"' "$dir"
""", needs=("fsx",)),
    Check("nccl-all-reduce-over-efa", PRELUDE + """
# an NCCL all-reduce across NODES nodes, 8 GPUs each, through aws-ofi-nccl on EFA: nccl-tests'
# all_reduce_perf (E2E_NCCL_TESTS: its path; built with MPI, launched by srun --mpi=E2E_MPI) with
# NCCL_DEBUG=INFO, which names the network NCCL chose; the job's other NCCL settings come from the
# fleet's nccl.env through the TaskProlog. E2E_MIN_BUSBW_GBPS, when set, is the bus bandwidth the
# largest size must reach (the acceptance threshold of the instance type).
bin=${E2E_NCCL_TESTS:-$(command -v all_reduce_perf || echo /opt/nccl-tests/build/all_reduce_perf)}
[ -x "$bin" ] || { echo "no all_reduce_perf at $bin: set E2E_NCCL_TESTS"; exit 1; }
out=$(as_user timeout 1200 srun -N NODES --ntasks-per-node=8 --gpus-per-node=8 --mpi="${E2E_MPI:-pmix}" \
      --export=ALL,NCCL_DEBUG=INFO "$bin" -b 1G -e 4G -f 2 -g 1 2>&1)
echo "$out" | grep -iE "selected provider|NET/OFI|Avg bus bandwidth|^ +[0-9]+ +[0-9]+ +float" | head -40
echo "$out" | grep -qi "selected provider is efa" || { echo "NCCL did not select libfabric's efa provider"; exit 1; }
busbw=$(echo "$out" | awk '/float +sum/ {v=$(NF-1)} END {print v+0}')
echo "bus bandwidth at the largest size: $busbw GB/s"
if [ -n "${E2E_MIN_BUSBW_GBPS:-}" ]; then
  awk -v b="$busbw" -v m="$E2E_MIN_BUSBW_GBPS" 'BEGIN {exit !(b >= m)}' || { echo "below $E2E_MIN_BUSBW_GBPS GB/s"; exit 1; }
fi
""", needs=("efa", "gpu")),
)


def script(check: Check, nodes: int) -> str:
    return check.script.replace("NODES", str(nodes))
