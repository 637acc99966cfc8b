#!/usr/bin/env bash
# Measures what `limits.capacity: nodes` costs per pass on a real API server holding BENCH_NODES nodes and BENCH_PODS
# pods (default 5,000 and 150,000, the README's figures). It starts its own local cluster in a separate state dir
# (so it never fills the one tests use), fills it, runs the benchmarks and stops the cluster again:
#   BenchmarkCapacityObserve   one pass listing every pod (time, allocations, peak heap);
#   BenchmarkCapacityPool      side by side in the same run: a template that may use every node (all pods listed)
#                              and one whose nodeSelector picks a pool of BENCH_POOL nodes (default 50; only those
#                              nodes' pods listed, one LIST per node).
#
#   scripts/bench-capacity.sh                                  # 5,000 nodes, 150,000 pods, a 50-node pool
#   BENCH_NODES=500 BENCH_PODS=15000 scripts/bench-capacity.sh # smaller
#   BENCH=BenchmarkCapacityPool scripts/bench-capacity.sh      # one of them
#
# The run writes its benchmark lines, with its date, commit, cluster size and load, to BENCH_RESULTS (default
# scripts/bench/results/capacity.md).
set -euo pipefail
cd "$(dirname "$0")/.."
export BENCH_NODES=${BENCH_NODES:-5000} BENCH_PODS=${BENCH_PODS:-150000} BENCH_POOL=${BENCH_POOL:-50}
BENCH=${BENCH:-'BenchmarkCapacity(Observe|Pool)$'}
CACHE=${JOBSCHED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/jobsched}
export JOBSCHED_CLUSTER_DIR=${JOBSCHED_CLUSTER_DIR:-$CACHE/bench-cluster}
trap 'scripts/cluster.sh down >&2 || true' EXIT
KUBECONFIG=$(NODES=0 scripts/cluster.sh up | tail -n 1)
export KUBECONFIG
# The benchmark needs no database, but the e2e package's TestMain wants the variable set.
export JOBSCHED_TEST_DSN=${JOBSCHED_TEST_DSN:-unused}
results=${BENCH_RESULTS:-scripts/bench/results/capacity.md}
out=$(mktemp)
trap 'rm -f "$out"; scripts/cluster.sh down >&2 || true' EXIT
load_before=$(cut -d' ' -f1 /proc/loadavg)
go test -tags integration -run '^$' -bench "$BENCH" -benchmem -benchtime 5x -timeout 60m -v ./pkg/e2e/ | tee "$out"
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo '?')
if [[ -n $(git status --porcelain --untracked-files=no 2>/dev/null) ]]; then commit+=-dirty; fi
{
	echo '# What `capacity: nodes` costs per pass'
	echo
	echo 'Written by `scripts/bench-capacity.sh`; do not edit by hand.'
	echo
	echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "- commit: $commit"
	echo "- cluster: $BENCH_NODES nodes, $BENCH_PODS pods; the pool: $BENCH_POOL nodes"
	echo "- machine: $(nproc) CPU(s), load average (1 min) $load_before at the start, $(cut -d' ' -f1 /proc/loadavg) at the end"
	echo
	echo '```'
	grep -E '^(Benchmark|goos|goarch|cpu:)' "$out"
	echo '```'
} >"$results"
echo "wrote $results" >&2
