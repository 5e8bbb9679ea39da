#!/usr/bin/env bash
# End-to-end test on a real Slurm (run by tests/tests/slurm.rs, so by
# `cargo test --workspace --release` and CI; or by hand after
# `cargo build --release`).
#
# Installs slurm-wlm and munge if missing, then starts on this machine, each
# with its own files under a temporary directory and free ports: munged (a
# fresh key), slurmctld and slurmd (a one-node slurm.conf for this host).
# Submits batch scripts made by `wmhcct slurm` that run
# tests/programs/mpi_pattern.c with 2 ranks under the tracer, waits for each
# job (bounded), and checks the job's report (ranks, exact totals), plots and
# exit status:
#   1. --launcher mpirun: a clean run;
#   2. --launcher mpirun, the program calls MPI_Abort: the template's
#      post-step merges the spill files into the job's report, also over a
#      report an earlier run of the job id left (a requeued job);
#   3. --launcher srun (direct launch, MpiDefault=pmix): a clean run; and
#      a rank that leaves without MPI_Finalize while the others finalize;
#   4. the README's one line (mpirun -x LD_PRELOAD=…) in a hand-written
#      script, twice: the first report is named after the job, the second
#      launch's takes the next free name (wmhcct-<job>-2.h5);
#   5. a program that does not use MPI (tests/programs/pattern.c), once in
#      the batch step itself (its own report) and as two tasks of srun (a
#      task farm: each leaves rank-<r>.wmprof, merged exactly).
# Every process it started is stopped by pid on exit (daemons, and job
# processes found by a marker in their environment), on failure or signal too.
#
# Exit status: 0 all passed, 1 something failed, 77 skipped (not root, or
# the packages cannot be installed: no apt or no network). A failure to
# start the daemons as root is a failure, not a skip.
# Every wait is bounded; the whole run takes well under a minute once the
# packages are installed.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${WMHCCT_BIN:-$ROOT/target/release/wmhcct}
LIB=${WMHCCT_LIB:-$ROOT/target/release/libwmhcct.so}
CHECK="$ROOT/tests/slurm/check.py"
PY=/usr/bin/python3
K=50
JOB_TIMEOUT=${WMHCCT_SLURM_JOB_TIMEOUT:-90}
# Nothing inherited may redirect the tracer or the tests.
unset LD_PRELOAD WMHCCT_OUT WMHCCT_SPILL_DIR WMHCCT_LIB WMHCCT_BIN WMHCCT_MPI_LIB SLURM_CONF || true

passed=0 failed=0
say() { echo "slurm: $*"; }
pass() { say "PASS $1"; passed=$((passed + 1)); }
fail() { say "FAIL $1"; failed=$((failed + 1)); }
finish() {
    say "$passed passed, $failed failed"
    [ "$failed" -eq 0 ] && exit 0
    exit 1
}
skip() {
    say "SKIPPED: $1"
    exit 77
}
abort() { # a failure that ends the run
    fail "$1"
    finish
}

[ -x "$BIN" ] && [ -f "$LIB" ] || abort "$BIN or $LIB missing: run cargo build --release"
[ "$(id -u)" -eq 0 ] || skip "not root: cannot start slurmctld, slurmd and munged here"

# --- packages -------------------------------------------------------------
installed() {
    [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null || true)" = "installed" ]
}
command -v dpkg-query >/dev/null && command -v apt-get >/dev/null ||
    skip "no dpkg/apt-get: install slurm-wlm and munge by hand"
missing=()
for p in slurm-wlm munge; do installed "$p" || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    APT_LOG=$(mktemp /tmp/wmhcct-slurm-apt.XXXXXX.log)
    APT=(timeout --foreground 240 apt-get -q -y --no-install-recommends -o DPkg::Lock::Timeout=60
        -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)
    if ! "${APT[@]}" install "${missing[@]}" >"$APT_LOG" 2>&1; then
        timeout --foreground 120 apt-get -q update -o DPkg::Lock::Timeout=60 >>"$APT_LOG" 2>&1
        "${APT[@]}" install "${missing[@]}" >>"$APT_LOG" 2>&1 ||
            skip "cannot install ${missing[*]} (no network or no apt repository?): $(tail -n 2 "$APT_LOG" | tr '\n' ' ')"
    fi
    rm -f "$APT_LOG"
fi
for c in munged munge slurmctld slurmd sbatch scontrol sinfo scancel mpicc; do
    command -v "$c" >/dev/null || abort "$c not found after installing slurm-wlm, munge (and scripts/setup.sh's openmpi)"
done

# --- daemons --------------------------------------------------------------
WORK=$(mktemp -d /tmp/wmhcct-slurm.XXXXXX) || abort "mktemp"
chmod 755 "$WORK"
# Processes started here (daemons) and by the jobs carry this in their
# environment; cleanup stops exactly those, by pid.
MARK="WMHCCT_SLURM_TEST=$WORK"
DAEMONS=()
JOBS=()
marked_pids() {
    grep -lzx -- "$MARK" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3 | grep -vx "$$"
}
running() { # pid: exists and is not a zombie
    local st
    st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) && [ -n "$st" ] && [ "$st" != Z ]
}
stop_pids() { # TERM, up to 10 s, then KILL
    [ $# -gt 0 ] || return 0
    kill -TERM "$@" 2>/dev/null
    for _ in $(seq 1 100); do
        local alive=0 p
        for p in "$@"; do running "$p" && alive=1; done
        [ "$alive" -eq 0 ] && return 0
        sleep 0.1
    done
    kill -KILL "$@" 2>/dev/null
}
cleanup() {
    trap - EXIT INT TERM HUP
    if [ ${#JOBS[@]} -gt 0 ] && [ -n "${SLURM_CONF:-}" ]; then
        timeout 10 scancel "${JOBS[@]}" 2>/dev/null
    fi
    # Job processes (slurmstepd, the batch script, mpirun, the ranks) first;
    # the daemons' own helpers (slurmctld's slurmscriptd) go with them.
    local daemons=" ${DAEMONS[*]} " jobs=() p ppid
    for p in $(marked_pids); do
        ppid=$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null)
        [[ "$daemons" == *" $p "* || "$daemons" == *" $ppid "* ]] || jobs+=("$p")
    done
    stop_pids "${jobs[@]}"
    # Then the daemons, last started first: slurmd, slurmctld, munged.
    local i
    for ((i = ${#DAEMONS[@]} - 1; i >= 0; i--)); do stop_pids "${DAEMONS[i]}"; done
    if [ "$failed" -eq 0 ] && [ "${WMHCCT_SLURM_KEEP:-0}" != 1 ]; then
        rm -rf "$WORK"
    else
        say "kept $WORK (logs in $WORK/log)"
    fi
}
trap cleanup EXIT
trap 'say "interrupted"; failed=$((failed + 1)); exit 1' INT TERM HUP

log_tail() { tail -n 5 "$WORK/log/$1" 2>/dev/null | tr '\n' ' '; }
started() { # name pid: still alive after a moment?
    sleep 0.3
    kill -0 "$2" 2>/dev/null || abort "$1 exited at start: $(log_tail "$1.log")"
}

mkdir -p "$WORK/munge" "$WORK/spool" "$WORK/state" "$WORK/log" "$WORK/jobs"
dd if=/dev/urandom of="$WORK/munge/munge.key" bs=1024 count=1 status=none
chmod 600 "$WORK/munge/munge.key"
SOCK="$WORK/munge/munge.sock"
env "$MARK" munged --foreground --force --key-file="$WORK/munge/munge.key" --socket="$SOCK" \
    --pid-file="$WORK/munge/munged.pid" --seed-file="$WORK/munge/seed" \
    --log-file="$WORK/log/munged.log" >"$WORK/log/munged.out" 2>&1 &
DAEMONS+=("$!")
disown
started munged "${DAEMONS[-1]}"
for _ in $(seq 1 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
munge -S "$SOCK" -n 2>/dev/null | unmunge -S "$SOCK" >/dev/null 2>&1 ||
    abort "munged does not answer on $SOCK: $(log_tail munged.log)"

read -r CTLD_PORT SLURMD_PORT < <("$PY" -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])') || abort "no free ports"
HOST=$(hostname -s)
CPUS=$(nproc)
[ "$CPUS" -ge 2 ] || CPUS=2 # config_overrides below: 2 ranks even on one CPU
MEM=$(($(awk '/^MemTotal:/ {print int($2 / 1024)}' /proc/meminfo) - 512))
[ "$MEM" -ge 256 ] || MEM=256
PLUGINS=$(dirname "$(find /usr/lib -path '*slurm*' -name 'mpi_pmix.so' -print -quit 2>/dev/null)" 2>/dev/null)
MPI_DEFAULT=none
[ -n "$PLUGINS" ] && [ "$PLUGINS" != . ] && MPI_DEFAULT=pmix
# Job ids (and the PMIx directories named after them) differ between
# clusters that may run at the same time on this machine.
FIRST_JOB=$(((RANDOM * 32768 + RANDOM) % 50000000 + 1000))
mkdir -p "$WORK/pmix"
echo "PMIxCliTmpDirBase=$WORK/pmix" >"$WORK/mpi.conf"
cat >"$WORK/slurm.conf" <<CONF
# One-node test cluster made by tests/slurm/run.sh.
ClusterName=wmhcct-test
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthType=auth/munge
AuthInfo=socket=$SOCK
CredType=cred/munge
StateSaveLocation=$WORK/state
SlurmdSpoolDir=$WORK/spool
SlurmctldPidFile=$WORK/slurmctld.pid
SlurmdPidFile=$WORK/slurmd.pid
SlurmctldLogFile=$WORK/log/slurmctld.log
SlurmdLogFile=$WORK/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=$MPI_DEFAULT
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
MailProg=/bin/true
InactiveLimit=0
KillWait=5
MinJobAge=300
FirstJobId=$FIRST_JOB
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$MEM State=UNKNOWN
PartitionName=debug Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF="$WORK/slurm.conf"
env "$MARK" slurmctld -D -f "$SLURM_CONF" >"$WORK/log/slurmctld.out" 2>&1 &
DAEMONS+=("$!")
disown
started slurmctld "${DAEMONS[-1]}"
env "$MARK" slurmd -D -N "$HOST" -f "$SLURM_CONF" >"$WORK/log/slurmd.out" 2>&1 &
DAEMONS+=("$!")
disown
started slurmd "${DAEMONS[-1]}"
ready=0
for _ in $(seq 1 60); do
    state=$(timeout 5 sinfo -h -n "$HOST" -o %t 2>/dev/null)
    case "$state" in idle*) ready=1; break ;; esac
    sleep 0.5
done
[ "$ready" -eq 1 ] || abort "the node never became idle (state '$state'): $(log_tail slurmctld.log) / $(log_tail slurmd.log)"
say "cluster up: node $HOST, $CPUS CPUs, MpiDefault=$MPI_DEFAULT, ports $CTLD_PORT/$SLURMD_PORT ($WORK)"

# --- jobs -----------------------------------------------------------------
cd "$WORK/jobs" || abort "cd $WORK/jobs"
mpicc -O1 -g -fno-omit-frame-pointer -o mpi_pattern "$ROOT/tests/programs/mpi_pattern.c" 2>"$WORK/log/mpicc.log" ||
    abort "mpicc mpi_pattern.c: $(log_tail mpicc.log)"

out_tail() { tail -n 8 "wmhcct-$JOB_ID.out" 2>/dev/null | tr '\n' ' '; }

# submit NAME LAUNCHER ARGS…: make the script with `wmhcct slurm`, check it
# with bash -n, then run_job NAME.
# run_job NAME: sbatch NAME.sbatch from $WORK/jobs, wait (bounded) for the
# job to end. Both set JOB_ID, JOB_STATE, JOB_EXIT and return non-zero
# (after a FAIL) if the job could not be run.
submit() {
    local name=$1 launcher=$2
    shift 2
    JOB_ID= JOB_STATE= JOB_EXIT=
    "$BIN" slurm --ntasks 2 --nodes 1 --time 5 --partition debug --launcher "$launcher" \
        --job-name "wmhcct-$name" -o "$name.sbatch" -- "$PWD/mpi_pattern" "$K" "$@" 2>"$WORK/log/$name.gen" ||
        { fail "$name: wmhcct slurm: $(log_tail "$name.gen")"; return 1; }
    bash -n "$name.sbatch" 2>"$WORK/log/$name.bashn" || { fail "$name: bash -n: $(log_tail "$name.bashn")"; return 1; }
    run_job "$name"
}
run_job() {
    local name=$1
    JOB_ID= JOB_STATE= JOB_EXIT=
    JOB_ID=$(env "$MARK" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        timeout 20 sbatch --parsable "$name.sbatch" 2>"$WORK/log/$name.sbatch.err") ||
        { fail "$name: sbatch: $(log_tail "$name.sbatch.err")"; return 1; }
    JOB_ID=${JOB_ID%%;*}
    JOBS+=("$JOB_ID")
    wait_job "$name"
}
# wait_job NAME: wait (bounded) for job $JOB_ID to end; sets JOB_STATE and
# JOB_EXIT, returns non-zero (after a FAIL) if it did not end in time.
wait_job() {
    local name=$1
    local info deadline=$((SECONDS + JOB_TIMEOUT))
    while [ "$SECONDS" -lt "$deadline" ]; do
        info=$(timeout 5 scontrol show job -o "$JOB_ID" 2>/dev/null)
        JOB_STATE=$(grep -o 'JobState=[A-Z_]*' <<<"$info" | cut -d= -f2)
        case "$JOB_STATE" in
        COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE | PREEMPTED)
            JOB_EXIT=$(grep -o 'ExitCode=[0-9]*:[0-9]*' <<<"$info" | cut -d= -f2)
            return 0
            ;;
        esac
        sleep 0.5
    done
    fail "$name: job $JOB_ID still ${JOB_STATE:-unknown} after ${JOB_TIMEOUT}s: $(out_tail)"
    timeout 10 scancel "$JOB_ID" 2>/dev/null
    return 1
}

# check_report NAME full|spill: the job's report against the pattern.
# (REPORT: a report other than the job's first, wmhcct-<job>.h5.)
check_report() {
    local name=$1 mode=$2 rep=${3:-wmhcct-$JOB_ID.h5}
    if [ ! -f "$rep" ]; then
        fail "$name: no report $rep; job output: $(out_tail)"
        return
    fi
    if ! "$BIN" report "$rep" --json >"$name.json" 2>"$WORK/log/$name.report"; then
        fail "$name: wmhcct report $rep: $(log_tail "$name.report")"
        return
    fi
    local errors
    if errors=$("$PY" "$CHECK" "$name.json" "$K" "$mode" 2>&1); then
        pass "$name: report $rep ($mode: ranks, exact counts and MPI totals)"
    else
        fail "$name: $(tr '\n' ' ' <<<"$errors")"
    fi
}

check_plots() {
    local name=$1 dir="wmhcct-$JOB_ID-plots" f missing=()
    for f in memory.png events.png contexts.png ranks.png memory.svg flame.svg; do
        [ -s "$dir/$f" ] || missing+=("$f")
    done
    if [ ${#missing[@]} -eq 0 ]; then pass "$name: plots in $dir"; else fail "$name: plots missing in $dir: ${missing[*]}"; fi
}

# 1. mpirun, clean run.
if submit mpirun mpirun; then
    if [ "$JOB_STATE" = COMPLETED ] && [ "$JOB_EXIT" = 0:0 ]; then
        pass "mpirun: job $JOB_ID completed (exit $JOB_EXIT)"
    else
        fail "mpirun: job $JOB_ID $JOB_STATE exit $JOB_EXIT: $(out_tail)"
    fi
    check_report mpirun full
    check_plots mpirun
    [ ! -e "wmhcct-$JOB_ID.h5.spill" ] || fail "mpirun: spill files after a clean run"
    grep -q "mpi_pattern done on 2 ranks" "wmhcct-$JOB_ID.out" || fail "mpirun: the program's output is not in the job output"
fi

# 2. mpirun, MPI_Abort on rank 1: the post-step merges the spill files.
if submit abort mpirun abort; then
    if [ "$JOB_STATE" = FAILED ] && [ "${JOB_EXIT%%:*}" != 0 ]; then
        pass "abort: job $JOB_ID failed with the step's status (exit $JOB_EXIT)"
    else
        fail "abort: job $JOB_ID $JOB_STATE exit $JOB_EXIT, expected FAILED with a non-zero exit: $(out_tail)"
    fi
    if [ -f "wmhcct-$JOB_ID.h5.spill/rank-1.wmprof" ] && grep -q "merging" "wmhcct-$JOB_ID.out"; then
        pass "abort: spill files merged by the post-step"
    else
        fail "abort: no spill file of rank 1 or no merge in the post-step: $(out_tail)"
    fi
    check_report abort spill
    check_plots abort
fi

# 2b. The same, where an earlier run of the job id (a requeued job runs
# again under its id) left its report: the post-step merges this run's
# spill files and shows this run's report, not the stale one (it used to
# skip the merge and print the earlier run's report). The job is held
# while the stale report is put in place.
if [ -f "wmhcct-$JOB_ID.h5" ] && "$BIN" slurm --ntasks 2 --nodes 1 --time 5 --partition debug \
    --launcher mpirun --job-name wmhcct-stale -o stale.sbatch -- "$PWD/mpi_pattern" "$K" abort \
    2>"$WORK/log/stale.gen"; then
    earlier="wmhcct-$JOB_ID.h5"
    if JOB_ID=$(env "$MARK" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        timeout 20 sbatch --parsable --hold stale.sbatch 2>"$WORK/log/stale.sbatch.err"); then
        JOB_ID=${JOB_ID%%;*}
        JOBS+=("$JOB_ID")
        cp "$earlier" "wmhcct-$JOB_ID.h5" && touch -d '1 hour ago' "wmhcct-$JOB_ID.h5"
        timeout 10 scontrol release "$JOB_ID"
        if wait_job stale; then
            if grep -q "merging" "wmhcct-$JOB_ID.out" &&
                [ "$(stat -c %Y "wmhcct-$JOB_ID.h5")" -gt "$(date -d '10 minutes ago' +%s)" ]; then
                pass "stale: the post-step merged this run's spill files over an earlier run's report"
            else
                fail "stale: the earlier run's report was kept: $(out_tail)"
            fi
            check_report stale spill
        fi
    else
        fail "stale: sbatch --hold: $(log_tail stale.sbatch.err)"
    fi
else
    fail "stale: no report of the abort job, or wmhcct slurm failed: $(log_tail stale.gen)"
fi

# 3. srun direct launch (needs Slurm's PMIx plugin for OpenMPI).
if [ "$MPI_DEFAULT" = pmix ]; then
    if submit srun srun; then
        if [ "$JOB_STATE" = COMPLETED ] && [ "$JOB_EXIT" = 0:0 ]; then
            pass "srun: job $JOB_ID completed (exit $JOB_EXIT)"
        else
            fail "srun: job $JOB_ID $JOB_STATE exit $JOB_EXIT: $(out_tail)"
        fi
        check_report srun full
        check_plots srun
    fi
else
    say "note: no mpi_pmix.so plugin: the srun job was not run"
fi
# 3b. srun, a rank that leaves without MPI_Finalize (exit 0) while the
# others finalize, which srun lets them do: the job ends as without the
# tracer (it used to wait in the reduction for the rank that left until
# Slurm killed it). Step 1, rank 2 of 4 leaves: the report holds ranks 0
# and 1 (rank 3 reports to rank 2), the spill directory every rank. Step 2,
# rank 0 leaves: no report; ranks 1 and 2 lost their parent and each leaves
# its subtree's profile (rank 2's with rank 3's). Each spill directory
# merges into the whole job, exactly.
if [ "$MPI_DEFAULT" = pmix ]; then
    mpicc -g -o mpi_leave "$ROOT/tests/programs/mpi_leave.c" 2>"$WORK/log/mpicc-leave.log" ||
        abort "mpicc mpi_leave.c: $(log_tail mpicc-leave.log)"
    cat >leave.sbatch <<EOF
#!/bin/bash
#SBATCH --ntasks=4
#SBATCH --overcommit
#SBATCH --output=wmhcct-%j.out
for leaver in 2 0; do
    srun --overcommit -n 4 \
        --export=ALL,LD_PRELOAD="$LIB",WMHCCT_OUT="\$PWD/leave\$leaver-\$SLURM_JOB_ID.h5" \
        "$PWD/mpi_leave" \$leaver
done
EOF
    # leave_check REPORT RANKS: the report's ranks and keep_block's context.
    leave_check() {
        "$BIN" report "$1" --json 2>/dev/null | "$PY" -c '
import json, sys
r = json.load(sys.stdin)
want = int(sys.argv[1])
ks = [c for c in r["contexts"] if any(f["function"] == "keep_block" for f in c["stack"])]
got = (r.get("ranks"), sum(c["count"] for c in ks), sum(c["bytes"] for c in ks))
exp = (want, want, sum(1000 * (k + 1) for k in range(want)))
sys.exit(0 if got == exp else f"ranks, keep_block calls, bytes {got}, expected {exp}")' "$2"
    }
    if run_job leave; then
        finished=$(grep -c "finished after MPI_Finalize" "wmhcct-$JOB_ID.out")
        if [ "$JOB_STATE" = COMPLETED ] && [ "$JOB_EXIT" = 0:0 ] && [ "$finished" = 6 ]; then
            pass "leave: job $JOB_ID completed (exit $JOB_EXIT), 3 ranks of each step finished after MPI_Finalize"
        else
            fail "leave: job $JOB_ID $JOB_STATE exit $JOB_EXIT, $finished ranks finished: $(out_tail)"
        fi
        spill="leave2-$JOB_ID.h5.spill"
        if errors=$(leave_check "leave2-$JOB_ID.h5" 2 2>&1) &&
            [ -f "$spill/rank-0.wmprof" ] && [ -f "$spill/rank-2.wmprof" ] && [ -f "$spill/rank-3.wmprof" ] &&
            grep -q "the report holds 2 of the job's 4 ranks" "wmhcct-$JOB_ID.out"; then
            pass "leave: rank 2 left: the report holds ranks 0 and 1, the spill directory the others, rank 0 said so"
        else
            fail "leave: rank 2 left: $errors $(ls -a "$spill" 2>&1 | tr '\n' ' ') $(out_tail)"
        fi
        for leaver in 2 0; do
            if "$BIN" merge "leave$leaver-$JOB_ID.h5.spill" -o "merged$leaver-$JOB_ID.h5" >/dev/null \
                2>"$WORK/log/leave$leaver.merge" &&
                errors=$(leave_check "merged$leaver-$JOB_ID.h5" 4 2>&1); then
                pass "leave: rank $leaver left: the spill directory merges into the whole job, exactly"
            else
                fail "leave: rank $leaver left: merge: $(log_tail "leave$leaver.merge") $errors"
            fi
        done
    fi
fi

# 4. The README's one line in a hand-written batch script: the report is
# named after the job, in the working directory; a second launch in the
# script writes the next free name instead of replacing the first.
cat >oneline.sbatch <<EOF
#!/bin/bash
#SBATCH --ntasks=2
#SBATCH --output=wmhcct-%j.out
mpirun -np 2 -x LD_PRELOAD="$LIB" "$PWD/mpi_pattern" $K
mpirun -np 2 -x LD_PRELOAD="$LIB" "$PWD/mpi_pattern" $K
EOF
if run_job oneline; then
    if [ "$JOB_STATE" = COMPLETED ] && [ "$JOB_EXIT" = 0:0 ]; then
        pass "oneline: job $JOB_ID completed (exit $JOB_EXIT)"
    else
        fail "oneline: job $JOB_ID $JOB_STATE exit $JOB_EXIT: $(out_tail)"
    fi
    check_report oneline full
    check_report oneline-2 full "wmhcct-$JOB_ID-2.h5"
fi

# 5. A program that does not use MPI: one process in the batch step itself
# writes its own report; two tasks of `srun` (a task farm) share the job's
# report name, so each leaves rank-<r>.<launch>.wmprof for `wmhcct merge`.
# A second task farm of the job (the next srun step) leaves its own files
# beside the first's (it used to replace them).
cc -O1 -g -o pattern "$ROOT/tests/programs/pattern.c" 2>"$WORK/log/cc.log" ||
    abort "cc pattern.c: $(log_tail cc.log)"
cat >farm.sbatch <<EOF
#!/bin/bash
#SBATCH --ntasks=2
#SBATCH --output=wmhcct-%j.out
LD_PRELOAD="$LIB" WMHCCT_OUT="\$PWD/single-\$SLURM_JOB_ID.h5" "$PWD/pattern"
srun -n 2 --export=ALL,LD_PRELOAD="$LIB" "$PWD/pattern"
srun -n 2 --export=ALL,LD_PRELOAD="$LIB" "$PWD/pattern"
EOF
# farm_totals REPORT RANKS MALLOCS: the report's rank count and malloc total.
farm_totals() {
    "$BIN" report "$1" --json 2>/dev/null | "$PY" -c '
import json, sys
r = json.load(sys.stdin)
got = (r.get("ranks"), r["totals"]["malloc"]["count"])
want = (int(sys.argv[1]), int(sys.argv[2]))
sys.exit(0 if got == want else f"ranks, mallocs {got}, expected {want}")' "$2" "$3"
}
if run_job farm; then
    if [ "$JOB_STATE" = COMPLETED ] && [ "$JOB_EXIT" = 0:0 ]; then
        pass "farm: job $JOB_ID completed (exit $JOB_EXIT)"
    else
        fail "farm: job $JOB_ID $JOB_STATE exit $JOB_EXIT: $(out_tail)"
    fi
    if errors=$(farm_totals "single-$JOB_ID.h5" 1 1100 2>&1); then
        pass "farm: the batch step's own process wrote its report"
    else
        fail "farm: single-$JOB_ID.h5: $errors $(out_tail)"
    fi
    spill="wmhcct-$JOB_ID.h5.spill"
    rank0=$(cd "$spill" 2>/dev/null && ls rank-0.*.wmprof 2>/dev/null | wc -l)
    rank1=$(cd "$spill" 2>/dev/null && ls rank-1.*.wmprof 2>/dev/null | wc -l)
    lines=$(grep -c "the 2 processes of this launch did not use MPI" "wmhcct-$JOB_ID.out")
    if [ "$rank0" = 2 ] && [ "$rank1" = 2 ] && [ ! -e "wmhcct-$JOB_ID.h5" ] && [ "$lines" = 2 ]; then
        pass "farm: both srun steps' two tasks left their rank-0 and rank-1 profiles, rank 0 of each said so"
    else
        fail "farm: spill files or rank 0's lines missing: $(ls "$spill" 2>&1 | tr '\n' ' ') $(out_tail)"
    fi
    # The directory merges as its newest launch, the second step; with
    # --remove-input what is left is the first step's, merged in turn.
    if "$BIN" merge "$spill" -o "farm-$JOB_ID.h5" --remove-input >/dev/null 2>"$WORK/log/farm.merge" &&
        grep -q "leaving out 2 profile(s) of an earlier launch" "$WORK/log/farm.merge" &&
        errors=$(farm_totals "farm-$JOB_ID.h5" 2 2200 2>&1); then
        pass "farm: the merge of the second step is exact for both tasks"
    else
        fail "farm: merge: $(log_tail farm.merge) $errors"
    fi
    if "$BIN" merge "$spill" -o "farm-$JOB_ID-1.h5" >/dev/null 2>"$WORK/log/farm.merge1" &&
        errors=$(farm_totals "farm-$JOB_ID-1.h5" 2 2200 2>&1); then
        pass "farm: the first step's profiles are all there, and merge exactly"
    else
        fail "farm: merge of the first step: $(log_tail farm.merge1) $errors"
    fi
fi
finish
