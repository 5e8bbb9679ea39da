#!/usr/bin/env bash
# End-to-end test on a real Slurm: starts munged, slurmctld and slurmd on this
# machine (one node), submits a template made by `wmhcct slurm` that runs an
# MPI test program with 2 ranks under the tracer, waits for the job, checks
# the report and the plots, and stops the daemons it started (by pid).
# A failing step (MPI_Abort) is checked too: its report is merged from spill
# files by the template's post-step.
#
# Prints a closing line "slurm: N passed, N failed[, N skipped]". Exit 0 when
# nothing failed; when the daemons cannot start (e.g. not root) the tests are
# reported as skipped, never as passed.
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN="$ROOT/target/release/wmhcct"
LIB="$ROOT/target/release/libwmhcct.so"
passed=0 failed=0 skipped=0
pass() { echo "slurm: PASS $1"; passed=$((passed + 1)); }
fail() { echo "slurm: FAIL $1"; failed=$((failed + 1)); }
finish() {
    echo "slurm: $passed passed, $failed failed, $skipped skipped"
    [ "$failed" -eq 0 ]
    exit $?
}
skip_all() {
    echo "slurm: SKIP: $1"
    skipped=2
    finish
}

[ -x "$BIN" ] && [ -f "$LIB" ] || { fail "target/release is not built (run cargo build --release)"; finish; }
[ "$(id -u)" -eq 0 ] || skip_all "not root: cannot start slurm daemons here"
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    apt-get update -qq >/dev/null 2>&1
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null 2>&1 \
        || skip_all "cannot install slurm-wlm and munge"
fi

WORK=$(mktemp -d /tmp/wmhcct-slurm.XXXXXX)
chmod 755 "$WORK"
PIDS=()
cleanup() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    sleep 1
    for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
}
trap cleanup EXIT

HOST=$(hostname -s)
CPUS=$(nproc)
MEM=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2 ))
mkdir -p "$WORK/spool" "$WORK/state" "$WORK/munge" "$WORK/log" "$WORK/jobs"
# munge: a private key, socket and daemon.
dd if=/dev/urandom of="$WORK/munge/munge.key" bs=1024 count=1 status=none
chmod 600 "$WORK/munge/munge.key"
munged --force --key-file="$WORK/munge/munge.key" --socket="$WORK/munge/munge.sock" \
    --pid-file="$WORK/munge/munged.pid" --log-file="$WORK/log/munged.log" \
    --seed-file="$WORK/munge/seed" >/dev/null 2>&1 || skip_all "munged does not start"
sleep 1
PIDS+=("$(cat "$WORK/munge/munged.pid")")

cat > "$WORK/slurm.conf" <<CONF
ClusterName=wmhcct
SlurmctldHost=$HOST
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$WORK/munge/munge.sock
CredType=cred/munge
SlurmctldPort=16817
SlurmdPort=16818
SlurmctldPidFile=$WORK/slurmctld.pid
SlurmdPidFile=$WORK/slurmd.pid
SlurmdSpoolDir=$WORK/spool
StateSaveLocation=$WORK/state
SlurmctldLogFile=$WORK/log/slurmctld.log
SlurmdLogFile=$WORK/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
InactiveLimit=0
KillWait=5
NodeName=$HOST CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
export SLURM_CONF="$WORK/slurm.conf"
slurmctld -f "$SLURM_CONF" >/dev/null 2>&1 || skip_all "slurmctld does not start (see $WORK/log)"
for _ in $(seq 1 20); do [ -f "$WORK/slurmctld.pid" ] && break; sleep 0.5; done
[ -f "$WORK/slurmctld.pid" ] && PIDS+=("$(cat "$WORK/slurmctld.pid")")
slurmd -f "$SLURM_CONF" >/dev/null 2>&1 || skip_all "slurmd does not start (see $WORK/log)"
for _ in $(seq 1 20); do [ -f "$WORK/slurmd.pid" ] && break; sleep 0.5; done
[ -f "$WORK/slurmd.pid" ] && PIDS+=("$(cat "$WORK/slurmd.pid")")
ready=0
for _ in $(seq 1 60); do
    if sinfo -h -o %t 2>/dev/null | grep -qE '^(idle|mix|alloc)'; then ready=1; break; fi
    sleep 1
done
[ "$ready" -eq 1 ] || skip_all "the slurm node never became idle: $(sinfo 2>&1 | tail -1)"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
mpicc -O1 -g -o "$WORK/jobs/mpi_pattern" "$ROOT/tests/programs/mpi_pattern.c" || { fail "mpicc"; finish; }

# Submit a template and wait (bounded) for the job to leave the queue.
run_job() { # name, extra app args
    local name=$1; shift
    "$BIN" slurm --ntasks 2 --nodes 1 --time 5 --launcher mpirun --partition debug \
        -o "$WORK/jobs/$name.sbatch" -- "$WORK/jobs/mpi_pattern" 50 "$@" || return 1
    bash -n "$WORK/jobs/$name.sbatch" || return 1
    local id
    id=$(cd "$WORK/jobs" && sbatch --parsable "$WORK/jobs/$name.sbatch") || return 1
    for _ in $(seq 1 180); do
        squeue -h -j "$id" 2>/dev/null | grep -q . || break
        sleep 1
    done
    squeue -h -j "$id" 2>/dev/null | grep -q . && { scancel "$id"; return 1; }
    echo "$id"
}

id=$(run_job ok) || { fail "sbatch job did not complete"; finish; }
rep="$WORK/jobs/wmhcct-$id.h5"
if [ -f "$rep" ] && "$BIN" report "$rep" --json > "$WORK/ok.json" 2>/dev/null \
    && /usr/bin/python3 - "$WORK/ok.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
assert r["ranks"] == 2, r["ranks"]
a = [c for c in r["contexts"] if c["kind"] == "malloc" and any(f["function"] == "ctx_a" for f in c["stack"][:1])]
assert a and a[0]["count"] == 50 + 100, a
assert r["totals"]["MPI_Sendrecv"]["count"] == 2, r["totals"]["MPI_Sendrecv"]
assert r["totals"]["MPI_Sendrecv"]["bytes"] == 2 * 8000, r["totals"]["MPI_Sendrecv"]
PY
then pass "sbatch job: report with 2 ranks and exact totals"; else fail "sbatch job report ($rep): $(cat "$WORK/jobs/wmhcct-$id.out" 2>/dev/null | tail -3)"; fi
if ls "$WORK/jobs/wmhcct-$id-plots/"*.png >/dev/null 2>&1 || ls "$WORK/jobs/wmhcct-$id-plots/"*.svg >/dev/null 2>&1; then
    pass "sbatch job: plots"
else
    fail "sbatch job: no plots in $WORK/jobs/wmhcct-$id-plots"
fi

id=$(run_job abort abort) || { fail "aborting job did not complete"; finish; }
rep="$WORK/jobs/wmhcct-$id.h5"
if [ -f "$rep" ] && "$BIN" report "$rep" --json > "$WORK/abort.json" 2>/dev/null \
    && /usr/bin/python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert r['ranks'] >= 1, r['ranks']" "$WORK/abort.json"
then pass "aborting job: report merged from spill files"; else fail "aborting job: no merged report ($rep)"; fi
finish
