#!/bin/sh
# phx run as mpirun users expect it: their spellings, slots against ranks,
# the runtime options checked once before any node starts, signals during a
# spawn, honest exit codes and messages. Small shell programs as nodes.
# usage: test_launcher_habits.sh PATH/TO/phx
PHX=${1:?usage: $0 PATH/TO/phx}
case $PHX in /*) ;; *) PHX=$(pwd)/$PHX ;; esac
T=$(mktemp -d "${TMPDIR:-/tmp}/phx_habits.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
trap 'exit 1' INT TERM
PASS=0
FAIL=0
export PHX_KILL_GRACE=1
unset PHX_SECRET PHX_SECRET_FILE PHX_PIDFILE PHX_RSH SLURM_JOB_NODELIST SLURM_NODELIST PHX_CONFIG
for v in $(env | sed -n 's/^\(PHX_[A-Z_]*\)=.*/\1/p'); do [ "$v" = PHX_KILL_GRACE ] || unset "$v"; done

. "$(dirname "$0")/lib.sh"
# One CPU for the launcher, so the slot rules do not depend on the machine.
if taskset -c 0 true 2>/dev/null; then PIN="taskset -c 0"; CPUS=1; else PIN=; CPUS=$(nproc); fi
run() { $PIN "$PHX" "$@" >"$T/out" 2>"$T/err"; RC=$?; }
SIZE='echo "size=$PHX_SIZE"'

# ---- mpirun's spellings ------------------------------------------------------
run run -np 2 sh -c "$SIZE"
check "-np 2: two nodes" '[ $RC = 0 ] && [ $(grep -c "size=2" "$T/out") = 2 ]'
run run +p2 sh -c "$SIZE"
check "+p2 (charmrun): two nodes" '[ $RC = 0 ] && [ $(grep -c "size=2" "$T/out") = 2 ]'
run run --host 127.0.0.1:2 sh -c "$SIZE"
check "--host h:2 is --host, not a prefix of --hostfile" \
    '[ $RC = 0 ] && [ $(grep -c "size=2" "$T/out") = 2 ] && ! grep -q hostfile "$T/err"'
run run -H 127.0.0.1,127.0.0.2:2 sh -c 'echo "$PHX_PEERS"'
check "-H a,b:2: three nodes placed host by host" \
    '[ $RC = 0 ] && [ $(grep -c "127\.0\.0\.1:[0-9]*,127\.0\.0\.2:[0-9]*,127\.0\.0\.2:[0-9]*\$" "$T/out") = 3 ]'
run run --hostf "$T/none" true
check "an unambiguous prefix works (--hostf is --hostfile)" '[ $RC = 2 ] && grep -q "cannot open hostfile" "$T/err"'
run run --ho 127.0.0.1 true
check "an ambiguous prefix (--ho) is a usage error" '[ $RC = 2 ] && grep -q "ambiguous" "$T/err"'
run run -f "$T/none" -H 127.0.0.1 true
check "--hostfile with --host: exit 2" '[ $RC = 2 ] && grep -q "give one" "$T/err"'
HABITS_B=fromhere run run -n 2 -x HABITS_A=set -x HABITS_B sh -c 'echo "a=$HABITS_A b=$HABITS_B"'
check "-x VAR=VALUE and -x VAR reach every node" '[ $RC = 0 ] && [ $(grep -c "a=set b=fromhere" "$T/out") = 2 ]'
run run -x HABITS_UNSET_VAR true
check "-x of an unset VAR: exit 2, named" '[ $RC = 2 ] && grep -q "HABITS_UNSET_VAR is not set" "$T/err"'
run run -x 1BAD=x true
check "-x with a bad name: exit 2" '[ $RC = 2 ]'
cat >"$T/fake_rsh" <<EOF
#!/bin/sh
echo "\$*" >>"$T/rsh.log"
shift
exec sh -c "\$*"
EOF
chmod +x "$T/fake_rsh"
PHX_RSH="$T/fake_rsh" run run -H far-away-host.invalid:2 -x HABITS_C="a b" sh -c 'echo "c=$HABITS_C"'
check "-x reaches remote nodes through the remote shell, quoted" \
    '[ $RC = 0 ] && [ $(grep -c "c=a b\$" "$T/out") = 2 ] && grep -q "HABITS_C=" "$T/rsh.log"'

# ---- slots -------------------------------------------------------------------
run run -n $CPUS true
check "as many nodes as cores: no word" '[ $RC = 0 ] && [ ! -s "$T/err" ]'
run run -n $((CPUS + 1)) true
check "one more node than cores: one warning naming the $CPUS slot(s), and it runs" \
    '[ $RC = 0 ] && [ $(wc -l <"$T/err") = 1 ] && grep -q "$((CPUS + 1)) nodes on $CPUS slot" "$T/err"'
run run -n $((CPUS * 8)) sh -c 'echo x'
check "8 nodes per core (the suite's 16 on 2 cores): runs, with the warning" \
    '[ $RC = 0 ] && [ $(grep -c x "$T/out") = $((CPUS * 8)) ] && grep -q "oversubscribing" "$T/err"'
run run -n $((CPUS * 8 + 1)) sh -c 'echo started'
check "over 8 nodes per core: refused, exit 2, nothing started" \
    '[ $RC = 2 ] && grep -q "over 8 per slot; refused (--oversubscribe" "$T/err" && [ ! -s "$T/out" ]'
run run --oversubscribe -n $((CPUS * 8 + 1)) true
check "--oversubscribe: runs without a word" '[ $RC = 0 ] && [ ! -s "$T/err" ]'
printf '127.0.0.1 slots=1\n' >"$T/hf1"
run run -f "$T/hf1" -n 9 true
check "hostfile slots count too (9 on 1 slot refused)" '[ $RC = 2 ] && grep -q "9 nodes on 1 slot is over" "$T/err"'
# RLIMIT_NPROC counts every task of this user: the limit leaves room for
# the ones running now, the job would go over it.
LIM=$(( $(ps -L -u "$(id -u)" --no-headers | wc -l) + 30 ))
if command -v prlimit >/dev/null; then
    prlimit --nproc=$LIM $PIN "$PHX" run --np $((LIM + 1)) -H 127.0.0.1:$((LIM + 1)) true >"$T/out" 2>"$T/err"; RC=$?
    check "more local nodes than RLIMIT_NPROC ($LIM): refused, exit 2" \
        '[ $RC = 2 ] && grep -q "process limit allows (ulimit -u: $LIM)" "$T/err"'
else
    echo "skip more local nodes than RLIMIT_NPROC: no prlimit (util-linux)"
fi

# ---- runtime options, checked once before any node starts -----------------------
# Each node would leave a file: none may exist after a refusal.
STARTED='touch "$0.$PHX_RANK"'
refused() {   # refused NAME GREP ARGS...: exit 2, one line matching GREP, no node started
    _name=$1 _re=$2; shift 2
    rm -f "$T"/mark.*
    run run -n 4 "$@"
    check "$_name" '[ $RC = 2 ] && [ $(wc -l <"$T/err") = 1 ] && grep -q -- "$_re" "$T/err" &&
                    ! ls "$T"/mark.* >/dev/null 2>&1'
}
refused "--phx-recovry=cr: one line, did you mean --phx-recovery" "unknown option --phx-recovry=cr; did you mean --phx-recovery?" \
    --phx-recovry=cr sh -c "$STARTED" "$T/mark"
refused "an unknown key after PROGRAM is refused by the launcher too" "did you mean --phx-ft?" \
    sh -c "$STARTED" "$T/mark" --phx-fft=1
refused "--phx-nonsense: the valid keys listed" "the options are workers, .*recovery-helpers, .*config and help" \
    --phx-nonsense=1 sh -c "$STARTED" "$T/mark"
refused "--phx-recovery=mlog-causl: the valid values and did you mean mlog-causal" \
    "expected none, cr, mlog-causal, .*; did you mean mlog-causal?" --phx-recovery=mlog-causl sh -c "$STARTED" "$T/mark"
refused "--phx-metrics-port=70000: exit 2" "bad value '70000' for option metrics-port" \
    --phx-metrics-port=70000 sh -c "$STARTED" "$T/mark"
refused "--phx-metrics-port=65534 on 4 nodes: the last rank's port is named" "rank 3 would serve port 65537" \
    --phx-metrics-port=65534 sh -c "$STARTED" "$T/mark"
refused "--phx-workers above 8 per CPU: refused with the bound" "at most 64 on this host" \
    --phx-workers=100000 sh -c "$STARTED" "$T/mark"
refused "--restart DIR without a checkpointing mode: refused with the reason" \
    "restart from $T .*needs a recovery mode that writes disk checkpoints" --restart "$T" sh -c "$STARTED" "$T/mark"
refused "--phx-ckpt-interval without a checkpointing mode" "option ckpt-interval takes effect only under" \
    --phx-ckpt-interval 5 sh -c "$STARTED" "$T/mark"
refused "--phx-ckpt-dir without a checkpointing mode" "option ckpt-dir takes effect only under" \
    --phx-ckpt-dir="$T" sh -c "$STARTED" "$T/mark"
refused "PHX_CKPT_DIR in the environment is checked too" "option ckpt-dir takes effect" \
    -x PHX_CKPT_DIR="$T" sh -c "$STARTED" "$T/mark"
refused "--phx-recovery=cr without ft" "recovery=cr needs fault tolerance" \
    --phx-recovery cr sh -c "$STARTED" "$T/mark"
refused "--phx-log at the end needs a value" "option --phx-log needs a value" sh -c "$STARTED" "$T/mark" --phx-log
run run -n 2 --phx-ft 1 --phx-log info sh -c 'echo "$@"' x
check "--phx-KEY VALUE: accepted, passed on as --phx-KEY=VALUE" \
    '[ $RC = 0 ] && [ $(grep -c "^\[[01]\] --phx-ft=1 --phx-log=info\$" "$T/out") = 2 ]'
run run -n 2 --phx-ft sh -c 'echo "$@"' x
check "--phx-ft alone stays on, PROGRAM is not taken as its value" \
    '[ $RC = 0 ] && [ $(grep -c "^\[[01]\] --phx-ft\$" "$T/out") = 2 ]'

# ---- signals during the spawn ------------------------------------------------------
# PHX_TEST_SPAWN_HOLD=K holds the spawn after K nodes until a signal comes:
# the signal lands inside the spawn by construction.
N=$((CPUS * 8 + 40)) K=30
rm -f "$T"/sp.*
PHX_TEST_SPAWN_HOLD=$K $PIN "$PHX" run --oversubscribe -n $N sh -c 'echo $$ >"$0.$PHX_RANK"; exec sleep 30' "$T/sp" \
    >"$T/out" 2>"$T/err" &
PID=$!
if wait_for '[ $(cat "$T"/sp.* 2>/dev/null | wc -l) -ge $K ]' 200; then
    t0=$(date +%s%N)
    kill -TERM $PID; wait $PID; RC=$?
    t1=$(date +%s%N)
    check "SIGTERM mid-spawn ($K of $N started): exit 143 within the 1 s grace" \
        '[ $RC = 143 ] && [ $(( (t1 - t0) / 1000000 )) -lt 2500 ] && grep -q "caught SIGTERM" "$T/err"'
    check "SIGTERM mid-spawn: no node after the $K-th was started" '[ $(ls "$T"/sp.* | wc -l) = $K ]'
    check "SIGTERM mid-spawn: every started node is gone" 'wait_for "none_alive \$(cat \"\$T\"/sp.*)" 30'
else
    kill -KILL $PID; bad "SIGTERM mid-spawn: the spawn never reached $K nodes"
fi
rm -f "$T"/sp.*
PHX_TEST_SPAWN_HOLD=3 $PIN "$PHX" run -n 6 --oversubscribe sh -c 'echo $$ >"$0.$PHX_RANK"; exec sleep 30' "$T/sp" \
    >"$T/out" 2>"$T/err" &
PID=$!
if wait_for '[ $(cat "$T"/sp.* 2>/dev/null | wc -l) -ge 3 ]' 200; then
    kill -INT $PID; wait $PID; RC=$?
    check "SIGINT mid-spawn: exit 130, nodes gone" \
        '[ $RC = 130 ] && wait_for "none_alive \$(cat \"\$T\"/sp.*)" 30 && [ $(ls "$T"/sp.* | wc -l) = 3 ]'
else
    kill -KILL $PID; bad "SIGINT mid-spawn: the spawn never reached 3 nodes"
fi

# ---- honest exits and messages -----------------------------------------------------
run run -n 3 sh -c '[ $PHX_RANK = 1 ] && kill -SEGV $$; exit 0'
check "a rank killed by SIGSEGV, the others exit 0: phx exits 139 and says why" \
    '[ $RC = 139 ] && grep -q "exit 139 = 128 + SIGSEGV, the signal that killed rank 1" "$T/err"'
run run sh -c 'kill -SEGV $$'
check "a single node killed by SIGSEGV: 139" '[ $RC = 139 ]'
run run -n 3 --phx-ft=1 sh -c '[ $PHX_RANK = 1 ] && kill -9 $$; exit 0'
check "with --phx-ft=1 a killed rank the others survive keeps exit 0" '[ $RC = 0 ]'
# A phalanx node with ft on tells its launcher so (SIGUSR1): a program can
# turn ft on itself (GLB's --glb-ft=on), out of the launcher's sight.
run run -n 3 sh -c 'kill -USR1 $PPID; [ $PHX_RANK = 1 ] && kill -9 $$; exit 0'
check "a node that says it runs with ft (SIGUSR1) keeps exit 0 after a kill" '[ $RC = 0 ]'
: >"$T/hf_empty"
run run -f "$T/hf_empty" true
check "an empty hostfile is named with its path" '[ $RC = 2 ] && grep -q "^phx: hostfile .$T/hf_empty. lists no hosts (it is empty)" "$T/err"'
printf '# nothing\n\n' >"$T/hf_comments"
run run -f "$T/hf_comments" true
check "a hostfile of comments is named with its path" '[ $RC = 2 ] && grep -q "hostfile .$T/hf_comments. lists no hosts" "$T/err"'
# A remote shell called ssh: the hosts are resolved before it runs.
cat >"$T/ssh" <<EOF
#!/bin/sh
echo "\$*" >>"$T/ssh.log"
exit 255
EOF
chmod +x "$T/ssh"
PHX_RSH="$T/ssh" run run -H no-such-host.invalid:2 true
check "an unresolvable host is named as unresolvable, before ssh runs" \
    '[ $RC = 2 ] && grep -q "host .no-such-host.invalid. is unresolvable" "$T/err" && [ ! -e "$T/ssh.log" ]'

echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
