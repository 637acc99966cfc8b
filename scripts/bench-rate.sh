#!/usr/bin/env bash
# The issue's rate-limit figures, run once: `limits.rate: {creates: 30, per: 1m}` over five minutes of
# `tick --fill-for`, a fill SIGKILLed in the middle of its creates and three fills racing after it, every succeeded Job
# deleted at once (pkg/e2e's TestRateFill with JOBSCHED_TEST_RATE; the test suite runs it at 10 per 20s over 2m). It
# measures the most creates in any minute (from every Job's creationTimestamp, kept by a watch) and the achieved
# rate, and writes them, with the run's date, commit and load, to BENCH_RESULTS (default
# scripts/bench/results/rate.md). It starts its own local cluster in a separate state dir and stops it again.
#
#   scripts/bench-rate.sh                                    # 30 per 1m over 5m (about 7 minutes)
#   JOBSCHED_TEST_RATE=60,1m,10m,1000 scripts/bench-rate.sh  # other figures: creates,per,total,rows
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${JOBSCHED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/jobsched}
export JOBSCHED_CLUSTER_DIR=${JOBSCHED_CLUSTER_DIR:-$CACHE/bench-rate-cluster}
export JOBSCHED_TEST_RATE=${JOBSCHED_TEST_RATE:-30,1m,5m,400}
results=${BENCH_RESULTS:-scripts/bench/results/rate.md}
row=$(mktemp)
trap 'rm -f "$row"; scripts/cluster.sh down >&2 || true' EXIT
KUBECONFIG=$(scripts/cluster.sh up | tail -n 1)
JOBSCHED_TEST_DSN=$(scripts/postgres.sh up | tail -n 1)
export KUBECONFIG JOBSCHED_TEST_DSN JOBSCHED_TEST_RATE_RESULTS=$row
load_before=$(cut -d' ' -f1 /proc/loadavg)
go test -tags integration -count=1 -run '^TestRateFill$' -v -timeout 30m ./pkg/e2e/ >&2
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo '?')
if [[ -n $(git status --porcelain --untracked-files=no 2>/dev/null) ]]; then commit+=-dirty; fi
{
	echo '# limits.rate under tick --fill-for: racing fills and a killed one'
	echo
	echo 'Written by `scripts/bench-rate.sh`; do not edit by hand.'
	echo
	echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "- commit: $commit"
	echo "- figures (creates,per,total,rows): $JOBSCHED_TEST_RATE"
	echo "- machine: $(nproc) CPU(s), load average (1 min) $load_before at the start, $(cut -d' ' -f1 /proc/loadavg) at the end"
	echo
	echo '| limits.rate | run | creates | a minute | most in any window | creates per window from the first |'
	echo '|-------------|----:|--------:|---------:|-------------------:|-----------------------------------|'
	cat "$row"
} >"$results"
echo "wrote $results" >&2
