#!/bin/sh
# Runs one libFuzzer binary for a bounded time from the seeds its corpus
# driver writes (the real encoders' output), and fails on any crash, leak
# or oracle abort. The last lines say what it did (runs, coverage).
# Usage: libfuzzer_run.sh FUZZER SEEDER SECONDS WORKDIR
set -eu
fuzzer=$1 seeder=$2 secs=$3 work=$4
rm -rf "$work"
mkdir -p "$work/corpus" "$work/crashes"
"$seeder" -o "$work/corpus"
# -timeout: one input taking a second is a hang; -rss_limit_mb keeps a
# second suite beside this one within the machine's memory.
"$fuzzer" -max_total_time="$secs" -timeout=5 -rss_limit_mb=1024 -print_final_stats=1 \
    -artifact_prefix="$work/crashes/" "$work/corpus" >"$work/log" 2>&1 || {
    tail -40 "$work/log"
    echo "libfuzzer_run: $fuzzer failed (inputs in $work/crashes)" >&2
    exit 1
}
grep -E '^#[0-9]+ +DONE|^Done|stat::number_of_executed_units|cov:' "$work/log" | tail -3
