#!/bin/bash
# GLB / FTGLB benchmark: every figure is a ratio against a
# baseline measured in the same run, medians of REPS runs.
#   1. UTS sequential rate (--seq) and parallel efficiency on P nodes:
#      t_seq / (P_cores * t_P), P_cores = min(P, cores).
#   2. glb-ft on vs off (same binary), UTS and BC, k in {256, 2048, 32768}:
#      overhead t_on / t_off - 1 and the steal-backup fraction.
#   3. One kill (UTS, ft on, a non-root rank dies mid-run at a protocol
#      point): t_fail / t_ff - 1, and kill -> restore-backed-up time.
# Usage: tools/bench/bench_glb.sh [BUILD_DIR] [REPS] [P]
set -u
B=${1:-build}/bin
REPS=${2:-3}
P=${3:-2}
UTS_TREE=${UTS_TREE:-"-t 1 -a 3 -d 12 -b 4 -r 19"}    # 66,106,929 nodes, ~8 s sequential
BC_GRAPH=${BC_GRAPH:-"-n 12 -s 2"}    # 4096 vertices, about 1 s sequential
CORES=$(nproc)
PC=$(( P < CORES ? P : CORES ))
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
unset PHX_GLB_FT PHX_GLB_K PHX_GLB_DIE PHX_FT PHX_TD

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
secs() { sed -n 's/.*Wallclock time = \([0-9.]*\) sec.*/\1/p' | head -1; }
calc() { awk "BEGIN { printf \"$1\", $2 }"; }

# samples NAME CMD...: REPS runs; prints the median wall time (the app's own
# figure); $TMP/NAME.cpu gets the median CPU seconds of the whole job (user +
# sys of every process: on a shared machine the fair measure of work).
samples() {
    local name=$1; shift
    : >"$TMP/$name.t"; : >"$TMP/$name.stats"; : >"$TMP/$name.c"
    for _ in $(seq "$REPS"); do
        PHX_GLB_STATS=1 /usr/bin/time -f "%U %S" -o "$TMP/time" "$@" >"$TMP/out" 2>"$TMP/err"
        secs <"$TMP/out" >>"$TMP/$name.t"
        awk '{ print $1 + $2 }' "$TMP/time" >>"$TMP/$name.c"
        grep -h glb-stats "$TMP/err" >>"$TMP/$name.stats"
    done
    median <"$TMP/$name.c" >"$TMP/$name.cpu"
    median <"$TMP/$name.t"
}
cpu() { cat "$TMP/$1.cpu"; }
# steal-backup fraction over every run of NAME
stlfrac() {
    awk '{ for (i = 1; i <= NF; i++) { split($i, a, "="); if (a[1] == "backups") b += a[2]; if (a[1] == "steal_backups") s += a[2] } }
         END { printf "%.2f", b ? s / b : 0 }' "$TMP/$1.stats"
}
backups() {
    awk '{ for (i = 1; i <= NF; i++) { split($i, a, "="); if (a[1] == "backups") b += a[2] } } END { printf "%d", b / '"$REPS"' }' "$TMP/$1.stats"
}

echo "glb benchmark: $REPS runs each, medians, P=$P ($CORES cores), $(date -u +%F)"
echo "UTS $UTS_TREE; BC $BC_GRAPH"

t_seq=$(samples seq "$B/uts" $UTS_TREE --seq)
# The machine's own parallel capacity: PC copies of --seq at once. Cores
# that share caches, memory bandwidth or a hypervisor's time slice make each
# copy slower than alone; no parallel runtime can beat that ceiling.
: >"$TMP/conc.t"
for _ in $(seq "$REPS"); do
    for _ in $(seq "$PC"); do "$B/uts" $UTS_TREE --seq | secs >>"$TMP/conc.w" & done
    wait
    sort -g "$TMP/conc.w" | tail -1 >>"$TMP/conc.t"; : >"$TMP/conc.w"
done
t_conc=$(median <"$TMP/conc.t")
nodes=$("$B/uts" $UTS_TREE --seq | sed -n 's/Tree size = \([0-9]*\),.*/\1/p')
t_off=$(samples uts_off "$B/phx" run -n "$P" "$B/uts" $UTS_TREE --glb-ft=off)
t_on=$(samples uts_on "$B/phx" run -n "$P" "$B/uts" $UTS_TREE --glb-ft=on)
printf '\n| UTS run | wall (s) | Mnodes/s | efficiency per core used (wall) | CPU s | work efficiency (CPU seq / CPU job) |\n|---|---|---|---|---|---|\n'
printf '| sequential (--seq) | %s | %s | 100%% | %s | 100%% |\n' "$t_seq" "$(calc %.2f "$nodes / $t_seq / 1e6")" "$(cpu seq)"
printf '| %s x --seq at once (capacity) | %s | %s | %s%% | - | - |\n' "$PC" "$t_conc" "$(calc %.2f "$PC * $nodes / $t_conc / 1e6")" \
    "$(calc %.0f "100 * $t_seq / $t_conc")"
for v in off on; do
    t=$( [ $v = off ] && echo "$t_off" || echo "$t_on" )
    printf '| P=%s glb-ft %s | %s | %s | %s%% | %s | %s%% |\n' "$P" $v "$t" "$(calc %.2f "$nodes / $t / 1e6")" \
        "$(calc %.0f "100 * $t_seq / ($PC * $t)")" "$(cpu uts_$v)" "$(calc %.0f "100 * $(cpu seq) / $(cpu uts_$v)")"
done
printf '\nEfficiency against the capacity (PC x --seq at once): glb-ft off %s%%, on %s%%\n' \
    "$(calc %.0f "100 * $t_conc / ($PC * $t_off)")" "$(calc %.0f "100 * $t_conc / ($PC * $t_on)")"

# Overhead: off and on for each k run back to back in every repetition, and
# the overhead is the median of the per-repetition ratios, so drift in the
# machine's load between repetitions cancels.
printf '\n| app | k | t off (s) | t on (s) | overhead (wall, median of paired ratios) | overhead (CPU) | backups/run | steal-backup fraction |\n|---|---|---|---|---|---|---|---|\n'
KS="256 2048 32768"
for app in uts bc; do
    if [ $app = uts ]; then args="$UTS_TREE"; else args="$BC_GRAPH"; fi
    for f in koff $(printf 'k%s ' $KS); do : >"$TMP/${app}_$f.t"; : >"$TMP/${app}_$f.c"; : >"$TMP/${app}_$f.stats"; done
    for k in $KS; do : >"$TMP/${app}_k$k.r"; : >"$TMP/${app}_k$k.rc"; done
    for _ in $(seq "$REPS"); do
        one() {   # one NAME FLAGS...: one run, appended to NAME's samples
            local name=$1; shift
            PHX_GLB_STATS=1 /usr/bin/time -f "%U %S" -o "$TMP/time" "$B/phx" run -n "$P" "$B/$app" $args "$@" \
                >"$TMP/out" 2>"$TMP/err"
            secs <"$TMP/out" >>"$TMP/$name.t"
            awk '{ print $1 + $2 }' "$TMP/time" >>"$TMP/$name.c"
            grep -h glb-stats "$TMP/err" >>"$TMP/$name.stats"
        }
        one ${app}_koff --glb-ft=off
        toff=$(tail -1 "$TMP/${app}_koff.t"); coff=$(tail -1 "$TMP/${app}_koff.c")
        for k in $KS; do
            one ${app}_k$k --glb-ft=on --glb-k=$k
            calc %.6f "$(tail -1 "$TMP/${app}_k$k.t") / $toff - 1" >>"$TMP/${app}_k$k.r"; echo >>"$TMP/${app}_k$k.r"
            calc %.6f "$(tail -1 "$TMP/${app}_k$k.c") / $coff - 1" >>"$TMP/${app}_k$k.rc"; echo >>"$TMP/${app}_k$k.rc"
        done
    done
    off=$(median <"$TMP/${app}_koff.t")
    for k in $KS; do
        printf '| %s | %s | %s | %s | %s%% | %s%% | %s | %s |\n' $app $k "$off" "$(median <"$TMP/${app}_k$k.t")" \
            "$(calc %+.1f "100 * $(median <"$TMP/${app}_k$k.r")")" "$(calc %+.1f "100 * $(median <"$TMP/${app}_k$k.rc")")" \
            "$(backups ${app}_k$k)" "$(stlfrac ${app}_k$k)"
    done
done

# One kill: rank 1 dies at its 4th probe block (P point), ft on, KP >= 4
# nodes (with 2 the survivor is alone and has nowhere to back up).
KP=$(( P < 4 ? 4 : P ))
ff=$(samples kill_ff "$B/phx" run -n "$KP" "$B/uts" $UTS_TREE --glb-ft=on)
: >"$TMP/rec.t"
for _ in $(seq "$REPS"); do
    PHX_GLB_STATS=1 "$B/phx" run -n "$KP" "$B/uts" $UTS_TREE --glb-ft=on --glb-die=P:1:4 >"$TMP/out" 2>"$TMP/err"
    secs <"$TMP/out" >>"$TMP/kill.t"
    d=$(sed -n 's/.*dies at .* t_ns=\([0-9]*\).*/\1/p' "$TMP/err" | head -1)
    r=$(sed -n 's/.*glb-restored rank=[0-9]* t_ns=\([0-9]*\).*/\1/p' "$TMP/err" | head -1)
    [ -n "$d" ] && [ -n "$r" ] && { calc %.3f "($r - $d) / 1e9"; echo; } >>"$TMP/rec.t"
done
tk=$(median <"$TMP/kill.t")
rec=$(median <"$TMP/rec.t")
printf '\n| one kill (UTS, P=%s, ft on, delta=%s ms) | value |\n|---|---|\n' "$KP" "${PHX_HB_TIMEOUT:-1000}"
printf '| t fault-free / t with a kill | %s s / %s s |\n| time lost t_fail/t_ff - 1 | %s%% |\n| kill -> restore backed up | %s s |\n' \
    "$ff" "$tk" "$(calc %+.0f "100 * ($tk / $ff - 1)")" "$rec"
