#!/bin/sh
# End-to-end checks of the phx launcher with small shell programs as nodes.
# usage: test_launcher.sh PATH/TO/phx
PHX=${1:?usage: $0 PATH/TO/phx}
case $PHX in /*) ;; *) PHX=$(pwd)/$PHX ;; esac
T=$(mktemp -d "${TMPDIR:-/tmp}/phx_launcher.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
trap 'exit 1' INT TERM
PASS=0
FAIL=0
export PHX_KILL_GRACE=1
unset PHX_SECRET PHX_SECRET_FILE PHX_PIDFILE PHX_RSH SLURM_JOB_NODELIST SLURM_NODELIST

. "$(dirname "$0")/lib.sh"
# run ARGS...: phx with stdout/stderr captured, status in $RC
run() { "$PHX" "$@" >"$T/out" 2>"$T/err"; RC=$?; }
pids_of() { awk '{ print $2 }' "$1"; }

# ---- basics --------------------------------------------------------------
run --help; check "--help exits 0 and prints usage" '[ $RC = 0 ] && grep -q "phx run" "$T/out"'
run version; check "version" '[ $RC = 0 ] && grep -q "^phx " "$T/out"'
run run; check "run without a program is a usage error" '[ $RC = 2 ]'
run bogus; check "unknown command" '[ $RC = 2 ]'

# ---- environment -----------------------------------------------------------
PHX_FOO=bar run run -n 3 sh -c 'echo "$PHX_RANK $PHX_SIZE $PHX_PEERS $PHX_JOB_ID $PHX_LAUNCHER_PID $PHX_SECRET $PHX_FOO"'
check "env: exit 0, three ranks" '[ $RC = 0 ] && [ $(wc -l <"$T/out") = 3 ]'
check "env: rank and size" 'grep -q "^\[0\] 0 3 " "$T/out" && grep -q "^\[1\] 1 3 " "$T/out" && grep -q "^\[2\] 2 3 " "$T/out"'
check "env: same peers, job id, launcher pid and secret on every rank" \
    '[ $(cut -d" " -f4- "$T/out" | sort -u | wc -l) = 1 ]'
check "env: peers are 3 distinct local host:port entries" \
    '[ $(awk "NR==1 { print \$4 }" "$T/out" | tr , "\n" | grep -c "^127\.0\.0\.1:[0-9][0-9]*$") = 3 ] &&
     [ $(awk "NR==1 { print \$4 }" "$T/out" | tr , "\n" | sort -u | wc -l) = 3 ]'
check "env: job id decimal, secret 64 hex, other PHX_* inherited" \
    'awk "NR==1 { exit !(\$5 ~ /^[0-9]+\$/ && \$7 ~ /^[0-9a-f]+\$/ && length(\$7) == 64 && \$8 == \"bar\") }" "$T/out"'
PHX_LOCAL_SIZE=9 run run -n 3 sh -c 'echo "local=$PHX_LOCAL_SIZE"'
check "env: PHX_LOCAL_SIZE is the number of nodes on the host (3 here)" '[ $(grep -c "local=3\$" "$T/out") = 3 ]'
# The rule itself is unit-tested (test_cluster_unit); here real nodes apply it.
CPUS=$(nproc); W4=$(( CPUS / 4 - 1 )); [ $W4 -ge 1 ] || W4=1
run run -n 4 "$(dirname "$PHX")/fib" 10 --phx-log=info
check "cores per node: 4 nodes on $CPUS CPUs run max(1, $CPUS/4 - 1) = $W4 workers each (rank 0 says)" \
    '[ $RC = 0 ] && grep -q "starting the job ($W4 workers here)" "$T/err"'
W1=$(( CPUS - 1 )); [ $W1 -ge 1 ] || W1=1
run run -n 1 "$(dirname "$PHX")/fib" 10 --phx-log=info
check "cores per node: 1 node on $CPUS CPUs runs $W1 workers" \
    '[ $RC = 0 ] && grep -q "starting the job ($W1 workers here)" "$T/err"'
PHX_SECRET=given run run -n 2 sh -c 'echo "s=$PHX_SECRET f=${PHX_SECRET_FILE-unset}"'
check "env: a preset PHX_SECRET passes unchanged" '[ $(grep -c "s=given f=unset" "$T/out") = 2 ]'
PHX_SECRET_FILE=/some/file run run sh -c 'echo "s=${PHX_SECRET-unset} f=$PHX_SECRET_FILE"'
check "env: a preset PHX_SECRET_FILE passes, no secret generated" 'grep -q "s=unset f=/some/file" "$T/out"'
run run --base-port 24000 -n 2 sh -c 'echo "$PHX_PEERS"'
check "env: --base-port numbers local ports from P" '[ $(grep -c "127.0.0.1:24000,127.0.0.1:24001" "$T/out") = 2 ]'

# ---- runtime flags before PROGRAM ----------------------------------------------
run run -n 2 --phx-ft=1 --pidfile "$T/pids" --phx-log=info -- sh -c 'echo "$1 $2 $3"' x a
check "--phx-* before PROGRAM: accepted and appended to its arguments" \
    '[ $RC = 0 ] && [ $(grep -c "^\[[01]\] a --phx-ft=1 --phx-log=info\$" "$T/out") = 2 ]'

# ---- output relay ------------------------------------------------------------
run run -n 3 sh -c '
    i=0; pad=$(printf "%0100d" 0 | tr 0 x)
    while [ $i -lt 1500 ]; do echo "rank $PHX_RANK line $i $pad$pad"; i=$((i + 1)); done
    echo "to stderr $PHX_RANK" >&2
    printf "tail%s" "$PHX_RANK"'
check "output: exit 0" '[ $RC = 0 ]'
check "output: every stdout line prefixed by its own rank, none interleaved" \
    'awk "!/^\[[0-2]\] rank [0-2] line [0-9]+ x+\$/ && !/^\[[0-2]\] tail[0-2]\$/ { bad = 1 }
          /line/ { if (substr(\$1, 2, 1) != \$3 || length(\$6) != 200) bad = 1; n++ }
          END { exit bad || n != 4500 }" "$T/out"'
check "output: partial last line flushed at EOF" \
    'grep -qx "\[0\] tail0" "$T/out" && grep -qx "\[2\] tail2" "$T/out"'
check "output: stderr relayed to stderr with prefix" \
    '[ $(grep -c "^\[[0-2]\] to stderr [0-2]\$" "$T/err") = 3 ] && ! grep -q "to stderr" "$T/out"'
run run sh -c 'head -c 70000 /dev/zero | tr "\0" a; echo; echo after'
check "output: a 70000-byte line is split at 64 KiB" \
    'awk "NR==1 { ok = length(\$0) == 65540 } NR==2 { ok = ok && length(\$0) == 4468 } NR==3 { ok = ok && \$0 == \"[0] after\" } END { exit !ok || NR != 3 }" "$T/out"'

# ---- exit codes ----------------------------------------------------------------
run run -n 3 sh -c 'exit 3'
check "exit: all nodes exit 3 -> phx exits 3" '[ $RC = 3 ]'
run run -n 2 sh -c 'exit $((PHX_RANK * 2))'
check "exit: disagreeing codes -> maximum with a warning" '[ $RC = 2 ] && grep -q "warning" "$T/err"'
run run -n 2 sh -c 'exit 75'
check "exit: fenced nodes reported, no normal exit -> 1" \
    '[ $RC = 1 ] && grep -q "rank 1 fenced (declared dead by the cluster)" "$T/err"'
run run -n 3 sh -c '[ $PHX_RANK = 1 ] && kill -9 $$; exit 76'
check "exit 76: the summary names the dead rank and why the code is not 0" \
    '[ $RC = 76 ] && grep -q "^phx: exit 76 (work lost): rank(s) 1 (SIGKILL) died holding work" "$T/err"'
run run -n 3 sh -c '[ $PHX_RANK = 2 ] && exit 75; [ $PHX_RANK = 1 ] && exit 0; exit 76'
check "exit 76: fenced ranks named, a rank that exited 0 explained, no mixed-code warning" \
    '[ $RC = 76 ] && grep -q "rank(s) 2 (fenced) died" "$T/err" &&
     grep -q "rank 1 exited 0: it saw the job end before" "$T/err" && ! grep -q warning "$T/err"'
run run -n 3 sh -c '[ $PHX_RANK = 0 ] && kill -9 $$; exit 70'
check "exit 70: the summary says fault tolerance is off" \
    '[ $RC = 70 ] && grep -q "^phx: exit 70 (peer lost): rank(s) 0 (SIGKILL) died and fault tolerance is off" "$T/err"'

run run -n 3 sh -c '[ $PHX_RANK = 1 ] && kill -9 $$; sleep 0.5; echo done $PHX_RANK'
check "sigkill: node death reported with pid, host and signal name" \
    'grep -q "^phx: rank 1 (pid [0-9]*, host 127.0.0.1) killed by signal 9 (SIGKILL)\$" "$T/err"'
check "sigkill: the others run to completion; phx exits 137 (128 + SIGKILL), as mpirun does" \
    '[ $RC = 137 ] && grep -q "^\[0\] done 0" "$T/out" && grep -q "^\[2\] done 2" "$T/out" &&
     grep -q "^phx: exit 137 = 128 + SIGKILL, the signal that killed rank 1" "$T/err"'

# ---- --abort-on-failure ----------------------------------------------------------
start=$(date +%s)
run run -n 3 --abort-on-failure --pidfile "$T/pids" sh -c '[ $PHX_RANK = 2 ] && kill -9 $$; exec sleep 20'
check "abort: a signal death stops the job, exit 1, quickly" \
    '[ $RC = 1 ] && [ $(( $(date +%s) - start )) -lt 10 ] && grep -q "killed by signal 9" "$T/err"'
check "abort: no node survives" 'none_alive $(pids_of "$T/pids")'
run run -n 2 --abort-on-failure sh -c '[ $PHX_RANK = 0 ] && exit 4; exec sleep 20'
check "abort: a lone non-zero exit stops the job after the grace" '[ $RC = 1 ] && grep -q "rank 0 exited with code 4" "$T/err"'
run run -n 3 --abort-on-failure sh -c 'exit 4'
check "abort: a job ending everywhere with 4 is not a failure" '[ $RC = 4 ]'

# ---- signals to the launcher ---------------------------------------------------------
# Rank 1 ignores SIGTERM (and so does its sleep): only the SIGKILL after the grace ends it.
rm -f "$T/pids" "$T"/gc.*
"$PHX" run -n 3 --pidfile "$T/pids" sh -c '
    [ $PHX_RANK = 1 ] && trap "" TERM
    sleep 30 & echo $! >"'"$T"'/gc.$PHX_RANK"; wait' >"$T/out" 2>"$T/err" &
PID=$!
if wait_for '[ -s "$T/pids" ] && [ -s "$T/gc.0" ] && [ -s "$T/gc.1" ] && [ -s "$T/gc.2" ]'; then
    kill -TERM $PID; wait $PID; RC=$?
    check "sigterm: phx exits 143" '[ $RC = 143 ]'
    check "sigterm: pidfile has 'rank pid host' for each node" \
        '[ $(grep -c "^[0-2] [0-9][0-9]* 127.0.0.1\$" "$T/pids") = 3 ] && [ ! -s "$T/out" ]'
    check "sigterm: no node or child of one survives (SIGTERM-proof rank too)" \
        'wait_for "none_alive \$(pids_of \"\$T/pids\") \$(cat \"\$T\"/gc.*)" 50'
    check "sigterm: the escalation to SIGKILL is reported" 'grep -q "rank 1 .*SIGKILL" "$T/err"'
else
    kill -KILL $PID; bad "sigterm: job did not start"
fi
rm -f "$T/pids"
PHX_PIDFILE="$T/pids" "$PHX" run -n 2 sh -c 'exec sleep 30' >"$T/out" 2>"$T/err" &
PID=$!
if wait_for '[ -s "$T/pids" ]'; then
    kill -INT $PID; wait $PID; RC=$?
    check "sigint: forwarded, phx exits 130, nodes gone" '[ $RC = 130 ] && none_alive $(pids_of "$T/pids")'
else
    kill -KILL $PID; bad "sigint: job did not start (PHX_PIDFILE)"
fi
# SIGKILL cannot be caught: the nodes must not outlive phx (PR_SET_PDEATHSIG).
rm -f "$T/pids"
"$PHX" run -n 3 --pidfile "$T/pids" sh -c 'exec sleep 30' >"$T/out" 2>"$T/err" &
PID=$!
if wait_for '[ -s "$T/pids" ]'; then
    kill -KILL $PID; wait $PID 2>/dev/null
    check "sigkill of phx: every node ends with it" 'wait_for "none_alive \$(pids_of \"\$T/pids\")" 50'
else
    kill -KILL $PID; bad "sigkill of phx: job did not start"
fi

# ---- program lookup --------------------------------------------------------------------
run run -n 2 no-such-program-phx
check "missing program: 127 with a clear message, nothing started" \
    '[ $RC = 127 ] && grep -q "no-such-program-phx.*not found" "$T/err" && [ ! -s "$T/out" ]'
printf '#!/bin/sh\necho hi\n' >"$T/noexec"
run run "$T/noexec"
check "non-executable program: 127" '[ $RC = 127 ] && grep -q "Permission denied" "$T/err"'
chmod +x "$T/noexec"
(cd "$T" && PATH="$T:$PATH" "$PHX" run noexec >"$T/out" 2>"$T/err"); RC=$?
check "program found through PATH" '[ $RC = 0 ] && grep -qx "\[0\] hi" "$T/out"'

# ---- hostfiles --------------------------------------------------------------------------
printf '127.0.0.1 slots=2\n\n127.0.0.1 junk=1\n' >"$T/hf_bad"
run run -f "$T/hf_bad" true
check "bad hostfile line: exit 2 with file:line" '[ $RC = 2 ] && grep -q "^$T/hf_bad:3: " "$T/err"'
run run -f "$T/no_such_hostfile" true
check "unreadable hostfile: exit 2, the file named, no FILE:0:" \
    '[ $RC = 2 ] && grep -q "^phx: cannot open hostfile .$T/no_such_hostfile.: No such file" "$T/err" &&
     ! grep -q ":0:" "$T/err"'
printf '# MPICH\n127.0.0.1:2\n127.0.0.2:1  # trailing comment\n' >"$T/hf_mpich"
run run -f "$T/hf_mpich" sh -c 'echo "$PHX_SIZE $PHX_PEERS"'
check "MPICH hostfile: 3 ranks placed host by host" \
    '[ $RC = 0 ] && [ $(grep -c "^\[[0-2]\] 3 127\.0\.0\.1:[0-9]*,127\.0\.0\.1:[0-9]*,127\.0\.0\.2:[0-9]*\$" "$T/out") = 3 ]'
printf '127.0.0.2 slots=1 max_slots=4\n   127.0.0.1 slots=2\n' >"$T/hf_ompi"
run run -f "$T/hf_ompi" -n 2 sh -c 'echo "$PHX_SIZE $PHX_PEERS"'
check "Open MPI hostfile with -n below the slots" \
    '[ $RC = 0 ] && [ $(grep -c "^\[[01]\] 2 127\.0\.0\.2:[0-9]*,127\.0\.0\.1:[0-9]*\$" "$T/out") = 2 ]'
run run -f "$T/hf_ompi" -n 5 sh -c 'echo "$PHX_PEERS"'
check "-n above the slots oversubscribes round-robin with a note" \
    '[ $RC = 0 ] && grep -q "oversubscrib" "$T/err" &&
     grep -q "^\[0\] 127\.0\.0\.2:[0-9]*,127\.0\.0\.1:[0-9]*,127\.0\.0\.1:[0-9]*,127\.0\.0\.2:[0-9]*,127\.0\.0\.1:[0-9]*\$" "$T/out"'

SLURM_JOB_NODELIST='127.0.0.[1-2]' SLURM_TASKS_PER_NODE='2,1' run run sh -c 'echo "$PHX_SIZE $PHX_PEERS"'
check "Slurm: node list and tasks per node from the environment" \
    '[ $RC = 0 ] && [ $(grep -c "^\[[0-2]\] 3 127\.0\.0\.1:[0-9]*,127\.0\.0\.1:[0-9]*,127\.0\.0\.2:[0-9]*\$" "$T/out") = 3 ]'

# ---- remote hosts through PHX_RSH -----------------------------------------------------------
cat >"$T/fake_rsh" <<EOF
#!/bin/sh
# Stands in for ssh: logs its arguments, then runs the command locally the
# way sshd would, through a shell that sees them joined by spaces.
echo "\$*" >>"$T/rsh.log"
shift
exec sh -c "\$*"
EOF
chmod +x "$T/fake_rsh"
printf 'far-away-host.invalid:2\n' >"$T/hf_remote"
PHX_RSH="$T/fake_rsh" PHX_FOO=fwd run run -f "$T/hf_remote" sh -c 'echo "$PHX_RANK $PHX_PEERS $PHX_FOO <$1>"' x "a b'c \$HOME"
check "rsh: remote nodes run with rank, peers from base port 17300, PHX_* forwarded, args quoted" \
    '[ $RC = 0 ] &&
     grep -qx "\[0\] 0 far-away-host.invalid:17300,far-away-host.invalid:17301 fwd <a b'"'"'c \$HOME>" "$T/out" &&
     grep -qx "\[1\] 1 far-away-host.invalid:17300,far-away-host.invalid:17301 fwd <a b'"'"'c \$HOME>" "$T/out"'
check "rsh: invoked as 'RSH HOST env PHX_...=... PROGRAM ARGS'" \
    '[ $(grep -c "^far-away-host.invalid env .*PHX_RANK=[01] PHX_LOCAL_SIZE=2 PHX_SECRET_STDIN=1 sh -c " "$T/rsh.log") = 2 ]'
PHX_SECRET=s3cr3t-xyz PHX_RSH="$T/fake_rsh" run run -f "$T/hf_remote" sh -c 'read -r s; echo "in=$s"'
check "rsh: the secret is the first line of stdin, never on the remote command line" \
    '[ $RC = 0 ] && [ $(grep -c "in=s3cr3t-xyz\$" "$T/out") = 2 ] && ! grep -q s3cr3t "$T/rsh.log" &&
     [ $(grep -c "PHX_SECRET_STDIN=1 .*PHX_LOCAL_SIZE=2\|PHX_LOCAL_SIZE=2 .*PHX_SECRET_STDIN=1" "$T/rsh.log") -ge 2 ]'
PHX_RSH="$T/fake_rsh" run run -f "$T/hf_remote" --base-port 25000 sh -c 'exit 5'
check "rsh: --base-port and exit codes through the remote shell" '[ $RC = 5 ] && grep -q "PHX_PEERS=far-away-host.invalid:25000,far-away-host.invalid:25001" "$T/rsh.log"'

PHX_RSH=/bin/false run run -f "$T/hf_remote" true
check "PHX_RSH=/bin/false: exit 1 and each failed remote shell is named" \
    '[ $RC = 1 ] && [ $(grep -c "^phx: rank [01]: ./bin/false far-away-host.invalid \.\.\.. exited with code 1 and printed nothing" "$T/err") = 2 ]'
PHX_RSH=" " run run -f "$T/hf_remote" true
check "PHX_RSH of blanks: exit 1 with a message" '[ $RC = 1 ] && grep -q "PHX_RSH names no command" "$T/err"'

echo "$PASS passed, $FAIL failed"
[ "$FAIL" = 0 ]
