#!/bin/bash
# A real single-machine Slurm (Debian's slurmctld and slurmd, a generated
# slurm.conf, munged with a generated key), all in a temp dir on
# unprivileged ports. Runs fib on 4 nodes through `salloc -n 4 phx run`
# and by direct launch `srun -n 4 fib` (no phx: each task derives its
# identity from SLURM_PROCID, SLURM_NTASKS and SLURM_STEP_NODELIST), and
# checks the results. Then the drain (recovery=cr, apps/jacobi): scancel
# --signal=TERM of one node's own one-task step drains that node (exit 0,
# the --seq checksum, no recovery round), and of the direct launch's whole
# step cancels the job. Skips (77) where Slurm or munge is missing or
# cannot start.
# Usage: test_slurm.sh BINDIR
BIN=$(cd "$1" && pwd)
PHX="$BIN/phx"
. "$(dirname "$0")/../integration/lib.sh"

for c in slurmctld slurmd munged srun salloc sinfo; do
    command -v "$c" >/dev/null || [ -x "/usr/sbin/$c" ] ||
        skip "no $c (Debian: slurmctld, slurmd, slurm-client, munge)"
done
PATH=$PATH:/usr/sbin
DAEMONS=""
slurm_cleanup() {
    for p in $DAEMONS; do kill -TERM "$p" 2>/dev/null; done
    for p in $DAEMONS; do gone "$p" 5000 || kill -9 "$p" 2>/dev/null; done
    cleanup
}
trap slurm_cleanup EXIT
trap 'exit 1' INT TERM

# Ports: one reserved block (lib.sh port_base) for Slurm's daemons and the
# direct-launch nodes, below the ephemeral range srun's listeners use.
PB=$(port_base) || exit 1
S=$TMP/slurm
mkdir -p "$S/state" "$S/spool" "$S/home/.phalanx" "$S/nohome"
chmod 700 "$S"
head -c 1024 /dev/urandom >"$S/munge.key" && chmod 600 "$S/munge.key"
munged -F --force --key-file="$S/munge.key" --socket="$S/munge.sock" --pid-file="$S/munged.pid" \
    --log-file="$S/munged.log" --seed-file="$S/munge.seed" 2>"$S/munged.err" &
DAEMONS="$DAEMONS $!"; disown $!
wait_for 10 test -S "$S/munge.sock" || skip "munged does not start: $(tail -2 "$S/munged.err" "$S/munged.log")"

USER_NAME=$(id -un)
cat >"$S/slurm.conf" <<EOF
ClusterName=phxtest$$
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$((PB + 250))
SlurmdPort=$((PB + 251))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$S/munge.sock
SlurmUser=$USER_NAME
SlurmdUser=$USER_NAME
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/slurmctld.log
SlurmdLogFile=$S/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# 4 CPUs whatever the machine has: 4 tasks fit on one node.
SlurmdParameters=config_overrides
ReturnToService=2
NodeName=localhost NodeAddr=127.0.0.1 CPUs=4 State=UNKNOWN
PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
EOF
export SLURM_CONF=$S/slurm.conf
slurmctld -D -i >"$S/slurmctld.out" 2>&1 &
DAEMONS="$DAEMONS $!"; disown $!
slurmd -D -N localhost >"$S/slurmd.out" 2>&1 &
DAEMONS="$DAEMONS $!"; disown $!
node_idle() { [ "$(sinfo -h -o %t 2>/dev/null)" = idle ]; }
wait_for 30 node_idle || skip "Slurm does not start: $(tail -3 "$S/slurmctld.log" "$S/slurmd.log" 2>&1)"
echo "# Slurm up: $(sinfo -h -o '%P %a %D %t %N')"

HB=$(hb_ms)
JOB_S=$(( 60 + 10 * HB / 1000 ))
unset PHX_SECRET PHX_SECRET_FILE PHX_RANK PHX_SIZE PHX_PEERS
# Direct launch: ports from PHX_BASE_PORT (unique to this run) + local id.
export PHX_BASE_PORT=$PB

timeout -k 5 $JOB_S salloc -Q -n 4 "$PHX" run "$BIN/fib" 18 >"$TMP/salloc.out" 2>"$TMP/salloc.err"; rc=$?
check "salloc -n 4 phx run fib 18: exit 0, the fault-free result on 4 nodes (rc $rc)" \
    eval '[ $rc = 0 ] && grep -q "^\[0\] fib(18) = 2584 on 4 nodes.*OK" "$TMP/salloc.out"'

head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$TMP/secret"; chmod 600 "$TMP/secret"
PHX_SECRET_FILE=$TMP/secret timeout -k 5 $JOB_S srun -Q -n 4 "$BIN/fib" 18 >"$TMP/srun.out" 2>"$TMP/srun.err"; rc=$?
check "srun -n 4 fib 18 (direct launch, PHX_SECRET_FILE): exit 0, result on 4 nodes (rc $rc)" \
    eval '[ $rc = 0 ] && [ "$(grep -c "^fib(18) = 2584 on 4 nodes.*OK" "$TMP/srun.out")" = 1 ]'

# Identity: every task reports the rank, size and peers it derived.
PHX_SECRET_FILE=$TMP/secret timeout -k 5 $JOB_S srun -Q -n 4 "$BIN/fib" 18 --phx-log=info \
    >"$TMP/srun2.out" 2>"$TMP/srun2.err"; rc=$?
check "direct launch: ranks 0-3 of 4 all start (rc $rc)" \
    eval '[ $rc = 0 ] && [ "$(grep -Eo "\[rank [0-3]\]" "$TMP/srun2.err" | sort -u | wc -l)" = 4 ]'

# With no secret given: the per-user default $HOME/.phalanx/secret.
cp "$TMP/secret" "$S/home/.phalanx/secret"
HOME=$S/home timeout -k 5 $JOB_S srun -Q -n 4 "$BIN/fib" 18 >"$TMP/srun3.out" 2>"$TMP/srun3.err"; rc=$?
check "direct launch with the default secret file \$HOME/.phalanx/secret (rc $rc)" \
    eval '[ $rc = 0 ] && grep -q "^fib(18) = 2584 on 4 nodes.*OK" "$TMP/srun3.out"'
HOME=$S/nohome timeout -k 5 $JOB_S srun -Q -n 4 "$BIN/fib" 18 >"$TMP/srun4.out" 2>"$TMP/srun4.err"; rc=$?
check "direct launch with no secret anywhere: fails, naming the file (rc $rc)" \
    eval '[ $rc != 0 ] && grep -q "nohome/.phalanx/secret" "$TMP/srun4.err" && ! grep -q "fib(18) =" "$TMP/srun4.out"'
# ---- drain: `scancel --signal=TERM JOB.STEP` stops one node ------------------------
# scancel signals every task of a step, and Slurm has no way to signal one
# task of a multi-task step; so each node is its own one-task step here
# (`srun -n 1 --overlap`, named after its rank, with the identity the phx
# launcher gives: PHX_RANK, PHX_SIZE, PHX_PEERS, PHX_SECRET_FILE) inside one
# allocation. apps/jacobi with recovery=cr on 4 nodes; at iteration 300
# (of 3000, a checkpoint every 100) jacobi's test gate holds the next
# checkpoint and the job's end, rank 3's step gets SIGTERM through scancel,
# and the gate opens once rank 3 logged its drain request (the signal lands
# inside the job by construction). With drain-on=term (the default) it hands its
# slices over at the next checkpoint and exits 0: every step exits 0, the
# checksum is jacobi --seq's, and no failure, rollback or recovery round
# happened.
D=$TMP/drain; mkdir -p "$D"
DN=4; DV=3
DARGS="-N 256 -i 3000 -c 100"
dref=$("$BIN/jacobi" --seq $DARGS -P $DN | sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p')
dpeers=""; for ((r = 0; r < DN; r++)); do dpeers+="${dpeers:+,}127.0.0.1:$((PB + 20 + r))"; done
cat >"$D/steps.sh" <<EOF
for r in \$(seq 0 $((DN - 1))); do
    PHX_RANK=\$r PHX_SIZE=$DN PHX_PEERS=$dpeers PHX_JOB_ID=$$ PHX_WORKERS=1 \\
        srun -Q -n 1 --overlap -J phxdrain$$-\$r "$BIN/jacobi" --phx-ft=1 --phx-recovery=cr \\
        --phx-eventlog="$D/ev.%r.jsonl" $DARGS -H 300 -g "$D/go" >"$D/out.\$r" 2>"$D/err.\$r" &
    echo \$! >"$D/srun.\$r"
done
for r in \$(seq 0 $((DN - 1))); do wait \$(cat "$D/srun.\$r"); echo \$? >"$D/rc.\$r"; done
EOF
PHX_SECRET_FILE=$TMP/secret timeout -k 5 $JOB_S salloc -Q -n $DN bash "$D/steps.sh" >"$D/salloc.out" 2>&1 &
SPID=$!
if wait_event "$D/ev.*.jsonl" '"ev":"jacobi_hold","iter":300\}' $((JOB_S * 1000)) >/dev/null; then
    step=$(squeue -h -s -o '%i %j' | awk -v n="phxdrain$$-$DV" '$2 == n { print $1 }')
    scancel --signal=TERM "${step:-none}" 2>"$D/scancel.err"; src=$?
    check "scancel --signal=TERM $step (rank $DV's step) at iteration 300 (rc $src)" [ "$src" = 0 ]
    check "drain: rank $DV got the SIGTERM and asked to drain" \
        eval 'wait_event "$D/ev.$DV.jsonl" "\"ev\":\"drain_request\"" $((JOB_S * 1000)) >/dev/null'
else
    fail "drain: the main task never logged its hold at iteration 300"
fi
gate_open "$D/go"
wait $SPID; rc=$?
dsum=$(sed -n 's/.*checksum=\([0-9a-f]*\).*/\1/p' "$D"/out.* | sort -u)
check "drain: the allocation ends with exit 0 (rc $rc)" [ "$rc" = 0 ]
check "drain: every step exited 0, rank $DV's too ($(cat "$D"/rc.* 2>/dev/null | tr '\n' ' '))" \
    [ "$(cat "$D"/rc.* 2>/dev/null | grep -c '^0$')" = $DN ]
check "drain: checksum ${dsum:-none} equals jacobi --seq's $dref" eval '[ -n "$dref" ] && [ "$dsum" = "$dref" ]'
check "drain: rank $DV drained and exited 0" \
    eval 'grep -qs "\"ev\":\"drain_exit\"" "$D/ev.$DV.jsonl" && grep -qs "\"ev\":\"exit\",\"code\":0" "$D/ev.$DV.jsonl"'
check "drain: every node applied the drain of rank $DV" \
    [ "$(grep -ls "\"ev\":\"drain_done\",\"rank\":$DV," "$D"/ev.*.jsonl | wc -l)" = $DN ]
for e in failure rollback recovery_done; do
    check "drain: no $e event" eval '! grep -qs "\"ev\":\"$e\"" "$D"/ev.*.jsonl'
done
# The direct launch's one step of 4 tasks: scancel --signal=TERM JOB.STEP
# reaches every node at once, as a cancelled job would; the job ends
# non-zero saying so, with no result (never a drain into nobody).
A=$TMP/all; mkdir -p "$A"
PHX_SECRET_FILE=$TMP/secret PHX_WORKERS=1 timeout -k 5 $JOB_S srun -Q -n $DN -J phxall$$ "$BIN/jacobi" \
    --phx-ft=1 --phx-recovery=cr --phx-eventlog="$A/ev.%r.jsonl" $DARGS -H 300 -g "$A/go" >"$A/out" 2>"$A/err" &
SPID=$!
if wait_event "$A/ev.*.jsonl" '"ev":"jacobi_hold","iter":300\}' $((JOB_S * 1000)) >/dev/null; then
    step=$(squeue -h -s -o '%i %j' | awk -v n="phxall$$" '$2 == n { print $1 }')
    scancel --signal=TERM "${step:-none}" 2>"$A/scancel.err"; src=$?
    check "scancel --signal=TERM $step (all 4 tasks of the step) at iteration 300 (rc $src)" [ "$src" = 0 ]
    # The gate stays shut until the job ended or every node asked.
    asked() { [ "$(grep -ls '"ev":"drain_request"' "$A"/ev.*.jsonl | wc -l)" = $DN ] || ! kill -0 $SPID 2>/dev/null; }
    wait_for $JOB_S asked
else
    fail "all: the main task never logged its hold at iteration 300"
fi
gate_open "$A/go"
wait $SPID; rc=$?
check "all: the job ends non-zero (rc $rc), says it was cancelled, prints no result" \
    eval '[ $rc != 0 ] && [ $rc != 124 ] && grep -q "the job is cancelled" "$A/err" && ! grep -q checksum= "$A/out"'
[ "$FAIL" = 0 ] || { echo "# drain:"; tail -n 5 "$D"/salloc.out "$D"/err.* "$D"/scancel.err "$A"/err 2>/dev/null | sed 's/^/#   /'; }
# On a failure, say why.
[ "$FAIL" = 0 ] || for f in salloc srun srun2 srun3; do
    grep -q . "$TMP/$f.err" 2>/dev/null && { echo "# $f.err:"; tail -n 8 "$TMP/$f.err" | sed 's/^/#   /'; }
done
finish
