#!/usr/bin/env bash
# ctest sim_properties: short simulations (n = 1024, three seeds) on the real
# ft/ state machines; phx-sim --check exits 1 when a property fails.
#  - every survivor ends with the same dead set, within the broadcast's
#    bound (f <= floor(log2 n) - 1) and past it (f = n/2 at n = 512, the
#    heartbeat digest + DSET repair of ft/hb; SIM_DEADSET_BEYOND=1 adds
#    n = 1024),
#    also after a partition longer than delta (the ranks declared dead
#    across the cut are fenced, the rest agree);
#  - ERA agreement and termination, failure-free and with the root dying
#    right after it sent its first decision message; shrink at n = 2048;
#  - recovery=cr: every survivor resumes after a crash (coordinator too);
#  - recovery=mlog-causal (ft/mlog's SCML under a stencil app): every task
#    catches up, the dead rank's task alone replays, each delivery its
#    dets name in the lost execution's order, no det gap; every node's
#    partial-round machine (ft/mlog/rec) ends with no checkpoint hold and
#    no replay phase open; a second failure in the period rolls back
#    globally (cr), also one during the first's replay (the machines void
#    it), and so does cr with the app;
#  - no early termination for any detector (fault-tolerant ones with a crash);
#  - the same arguments give the same output (determinism).
set -u
SIM=${1:?usage: test_sim.sh PATH/TO/phx-sim}
N=1024
fail=0
run() {
    local out
    # --stop-early: 2 delta after every crash is known everywhere, enough
    # for late notices or fencing to show, without simulating idle heartbeats
    if ! out=$("$SIM" --n=$N --check --stop-early=1 "$@" 2>&1); then
        echo "FAIL: phx-sim --n=$N $*"
        echo "$out"
        fail=1
    fi
}
for seed in 1 2 3; do
    run --seed=$seed --crash-random=9@3000
    run --seed=$seed --crash-adjacent=9@3000 --until-ms=60000
    run --seed=$seed --host-size=8 --crash-host=$((seed * 5))@3000 --reset=1
    run --seed=$seed --partition=0.25@3000:8000
    # the origin of the first failure notice dies right after its first copy
    run --seed=$seed --crash-random=3@3000 --jitter-us=20 --dist=exp --crash-on=-1:bcast:1
    run --seed=$seed --hb=0 --era=2 --lat-us=5 --jitter-us=20 --dist=exp --fifo=1
    run --seed=$seed --era=1 --era-at-ms=3000 --crash-on=0:era:1 --skew-us=500
    for td in 4c edod hcda cda; do
        run --seed=$seed --hb=0 --td=$td --td-hops=200 --task-us=50 --jitter-us=10 --dist=uniform
    done
    # recovery=cr (ft/ckpt's round table and relocation): every survivor
    # resumes (GO) after a silent crash; the coordinator dying before it
    # decides, and right after (a second round)
    run --seed=$seed --cr=1 --state-mb=16 --crash=$((seed * 7))@3000
    run --seed=$seed --cr=1 --state-mb=16 --crash=5@3000 --crash=0@3900.5
    run --seed=$seed --cr=1 --state-mb=16 --crash=5@3000 --crash=0@3902.1
    # recovery=mlog-causal: exp jitter and skew reorder the two neighbours'
    # frames, so the replay must hold what its dets do not name yet
    run --seed=$seed --mlog=1 --app-start-ms=2500 --crash=$((seed * 7))@3000 --jitter-us=30 --dist=exp --skew-us=300
    for td in indep rellazy releager; do
        run --seed=$seed --td=$td --td-hops=200 --task-us=50 --crash=$((seed + 3))@0.2
    done
done
run --seed=1 --mlog=1 --app-start-ms=2500 --crash=5@3000 --crash=600@3000
run --seed=1 --cr=1 --app=1 --app-start-ms=2500 --crash=5@3000
# the coordinator dying right after it decided the partial round: the new
# coordinator hears pr from the ranks that began it and decides globally
run --seed=1 --mlog=1 --app-start-ms=2500 --crash=5@3000 --crash=0@3902.1
# a second failure during the first one's partial round (rank 600 dies
# before its hand-back, known while the replay runs): every live node's
# ft/mlog/rec machine must void the replay (DROP) and fall back to the
# global rollback, and --check finds no hold or replay phase left open
out=$("$SIM" --n=$N --check --seed=1 --mlog=1 --app-start-ms=2000 --until-ms=8000 \
        --crash=5@3000 --crash=600@3950 2>&1)
case "$?:$out" in
    0:*'"drops":1022,'*'"work_lost":0,'*) ;;
    *) echo "FAIL: mlog fallback during a replay"; echo "$out"; fail=1 ;;
esac
# negative control: one handed-back det pair corrupted, the order check must fire
if "$SIM" --n=$N --check --stop-early=1 --seed=1 --mlog=1 --app-start-ms=2500 --crash=7@3000 \
        --jitter-us=30 --dist=exp --ml-test-swap=1 >/dev/null 2>&1; then
    echo "FAIL: corrupted dets went unnoticed (--ml-test-swap=1)"; fail=1
fi
N=512 run --seed=1 --crash-random=256@3000 --until-ms=60000
# shrink past the old 1024-rank limit: a rank known dead before,
# and rank 1 dying right after its first shrink message (its UP); every
# survivor builds the same group: every survivor, no live rank left out
N=2048 run --seed=1 --era=1 --shrink=1 --era-at-ms=3000 --crash=5@1000 --crash-on=1:era:1
if [ "${SIM_DEADSET_BEYOND:-0}" = 1 ]; then
    run --seed=1 --crash-random=$((N / 2))@3000 --until-ms=60000
fi
strip() { sed 's/"rss_per_node_bytes":[0-9]*,//'; }
a=$("$SIM" --n=$N --seed=7 --crash-random=3@2000 --jitter-us=30 --dist=exp --skew-us=300 --drift-ppm=50 | strip)
b=$("$SIM" --n=$N --seed=7 --crash-random=3@2000 --jitter-us=30 --dist=exp --skew-us=300 --drift-ppm=50 | strip)
if [ "$a" != "$b" ]; then
    echo "FAIL: two runs with the same seed differ"; echo "$a"; echo "$b"; fail=1
fi
[ $fail = 0 ] && echo "sim_properties: all passed"
exit $fail
