#!/usr/bin/env bash
# One benchmark, one table: jobsched measured on the local control plane and PostgreSQL, each figure beside its
# reference from the same run (scripts/bench/main.go does the measuring):
#   API calls per pass     apiserver_request_total from /metrics before and after one tick creating 10 Jobs;
#   pass time vs backlog   a pass over 100 and over 1,000,000 waiting rows (indexed query);
#   creates per second     `jobsched tick` with default flags vs a bare client-go (16 workers, no client-side
#                          limit, plain POSTs of the same Jobs), at 10 / 1,000 / 10,000 creates;
#   peak RSS vs Jobs       `jobsched dry-run` (built as the Dockerfile builds it) under /usr/bin/time -v with 1,000 /
#                          10,000 / 100,000 Jobs of its scheduler (made directly by a bare client), without and with
#                          GOMEMLIMIT as the CronJob sets it, the median of 3 runs;
#   read vs excluded keys  the pass's read with 10 and with 5,000 keys excluded;
#   the drain              12 rows through a node that fits 2 pods of 20 s, a tick every 60 s as a */1 CronJob
#                          (Forbid) would start them: one pass per tick, and --fill-for 50s, against the ideal
#                          makespan; written to scripts/bench/results/drain.md (BENCH_DRAIN_RESULTS) as well.
# It starts its own cluster in its own state dir (never the one tests use) and stops it at the end. The drain runs
# first, with the whole cluster; then the controller-manager is stopped, so that the Jobs of the other parts make no
# pods and the cluster stays quiet. The tables it makes in the shared PostgreSQL are dropped at the end.
#
#   scripts/bench.sh              # prints the table, writes it to scripts/bench/results/bench.md (about 35 minutes on 2 cores)
#   BENCH_JOBS=1000,10000 BENCH_CREATES=10,1000 scripts/bench.sh   # smaller
#   BENCH_ONLY=backlog,excluded KEEP=1 scripts/bench.sh   # some parts; KEEP=1 keeps the cluster, its Jobs, the tables
#   BENCH_ONLY=drain scripts/bench.sh                # the drain alone (about 8 minutes)
#   BENCH_ONLY=autoscale scripts/bench.sh            # the autoscaled drain alone, on Karpenter (scripts/bench/autoscale.go)
#   BENCH_ONLY=memory scripts/bench.sh               # peak RSS against BENCH_REF alone (scripts/bench/memory.go)
#   BENCH_ONLY=fill scripts/bench.sh                 # fill at cluster scale against BENCH_FILL_REF (scripts/bench/fill.go)
#   BENCH_ONLY=fill BENCH_FILL_NODES=500 BENCH_THROUGHPUT_ROWS=2000 scripts/bench.sh   # smaller
#   BENCH_ONLY=sizes scripts/bench.sh                # per-row sizes (job.requestsFrom) against one template sized for the
#                                                    # largest task, a mixed backlog on 2 nodes (scripts/bench/sizes.go;
#                                                    # about 9 minutes), not run unless named
#   BENCH_ONLY=sizes-autoscale scripts/bench.sh      # the same two sides with capacity autoscale on Karpenter: nodes
#                                                    # launched, NodeClaim-seconds (scripts/bench/sizes_autoscale.go),
#                                                    # not run unless named
#   BENCH_ONLY=sizes-pass scripts/bench.sh           # one pass's cost with per-row sizes at 5,000 nodes, in process
#                                                    # (scripts/bench/sizes_pass.go), not run unless named
#   BENCH_ONLY=pickup scripts/bench.sh               # insert → Job with source.notify, source.poll and BENCH_PICKUP_REF
#                                                    # (scripts/bench/pickup.go; about 45 minutes), not run unless named
#
# Environment: BENCH_JOBS, BENCH_CREATES (comma-separated sizes), BENCH_BACKLOG (default 1000000), BENCH_ROUNDS
# (alternating rounds of each create size, default 5), BENCH_CREATE_BUDGET (seconds that making the RSS rows' Jobs
# may take, default 900: past it the row is measured at what was made, and says so), BENCH_ONLY (parts, comma-
# separated: calls, backlog, creates, RSS, excluded, drain, autoscale, memory, sizes), BENCH_DRAIN_ROWS (12), BENCH_DRAIN_TASK_SECONDS (20),
# BENCH_DRAIN_SCHEDULE_SECONDS (60), BENCH_DRAIN_FILL_SECONDS (50), BENCH_DRAIN_RESULTS, BENCH_AUTOSCALE_ROWS (100),
# BENCH_AUTOSCALE_CPU (the NodePool's limit, 40), BENCH_AUTOSCALE_TASK_SECONDS (10), BENCH_AUTOSCALE_RESULTS (default
# scripts/bench/results/autoscale.md), BENCH_RESULTS (the table's
# file, default scripts/bench/results/bench.md: the run writes it with its date, commit and load), KEEP=1; the memory
# part: BENCH_REF (the reference build's git revision, default be8acfe), BENCH_MEMORY_JOBS (10000),
# BENCH_MEMORY_ROUNDS (alternating rounds, default and at least 5), BENCH_MEMORY_RESULTS (its own file, default
# scripts/bench/results/memory.md); the fill part (scripts/bench/fill.go, not run unless named in BENCH_ONLY): BENCH_FILL_REF
# (default a225b90, every refill a whole pass), BENCH_FILL_NODES (sizes, default 500,5000; 0: none), BENCH_FILL_PODS_PER_NODE (30),
# BENCH_FILL_ROWS (40), BENCH_FILL_TIMEOUT (a refill run's pass --timeout, seconds, default 30), BENCH_FILL_BUDGET (seconds to grow the cluster to a size, default 1800), BENCH_THROUGHPUT_NODES
# (1000), BENCH_THROUGHPUT_ROWS (10000; 0: no throughput rows), BENCH_THROUGHPUT_ACTIVE (1000),
# BENCH_THROUGHPUT_TIMEOUT (a pass's --timeout, seconds, default 60), BENCH_THROUGHPUT_ROUNDS (rounds of both
# fills, each between two bare loops, default 1; above 1 a median ratio per fill), BENCH_THROUGHPUT_PLAIN=1 (each
# round also runs one pass without --fill-for, which watches nothing, between two bare loops), BENCH_FILL_NOTE (a line
# the results must carry, e.g. why a size was left out), BENCH_FILL_RESULTS
# (default scripts/bench/results/fill.md); the mixed drain (scripts/bench/sizes.go, not run unless named):
# BENCH_SIZES_ROWS (64), BENCH_SIZES_NODES (2, of 8 CPU and 16Gi), BENCH_SIZES_TASK_SECONDS (15),
# BENCH_SIZES_SCHEDULE_SECONDS (60), BENCH_SIZES_FILL_SECONDS (50), BENCH_SIZES_RESULTS (default
# scripts/bench/results/sizes.md), BENCH_SIZES_TRACE (a directory: per side and round, the CPU requested at each
# sample and every tick's log).
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${JOBSCHED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/jobsched}
export JOBSCHED_CLUSTER_DIR=${JOBSCHED_CLUSTER_DIR:-$CACHE/cluster-bench}
work=$(mktemp -d)
cleanup() {
	rm -rf "$work"
	if [[ ${KEEP:-} != 1 ]]; then scripts/cluster.sh down >&2 || true; fi
}
trap cleanup EXIT

only=${BENCH_ONLY:-}
# Karpenter only for the autoscaled drain (its part, or every part).
karpenter=
if [[ -z $only || ,$only, == *,autoscale,* ]]; then karpenter=1; fi
if [[ ,$only, == *,sizes-autoscale,* ]]; then karpenter=1; fi
# The fill part runs thousands of Jobs to completion a minute: the controller-manager and the scheduler get a big
# cluster's client QPS and Job syncs (their defaults, 20 QPS and 5 syncs, complete a few Jobs a second, and the bench
# would measure them, not jobsched). fill.go writes them into its results.
if [[ ,$only, == *,fill,* ]]; then
	# A node is marked unreachable after --node-monitor-grace-period (50s) without a heartbeat: under the load of
	# thousands of kwok nodes their heartbeats come late, and the taint would evict the filler pods; 5m rides it out.
	export KCM_ARGS=${KCM_ARGS:---kube-api-qps 500 --kube-api-burst 1000 --concurrent-job-syncs 50 --concurrent-gc-syncs 50 --node-monitor-grace-period 5m}
	export SCHEDULER_ARGS=${SCHEDULER_ARGS:---kube-api-qps 500 --kube-api-burst 1000}
	# kwok changes 4 pods at once by default: Running, then Succeeded, a few a second under load. It renews each
	# node's Lease every quarter of nodeLeaseDurationSeconds (40s by default: 500 writes a second at 5,000 nodes, on
	# the 2 cores the API server shares with everything); 600s renews every 150s (the node status heartbeat of
	# scripts/kwok/stages.yaml, every 20-45s, keeps the nodes Ready).
	printf 'apiVersion: config.kwok.x-k8s.io/v1alpha1\nkind: KwokConfiguration\noptions:\n  podPlayStageParallelism: 64\n  nodePlayStageParallelism: 16\n  nodeLeaseParallelism: 16\n  nodeLeaseDurationSeconds: 600\n' >"$work/kwok.yaml"
	export KWOK_ARGS=${KWOK_ARGS:---config $work/kwok.yaml}
fi
KUBECONFIG=$(KARPENTER=$karpenter NODES=0 scripts/cluster.sh up | tail -n 1)
export KUBECONFIG
JOBSCHED_BENCH_DSN=$(scripts/postgres.sh up | tail -n 1)
export JOBSCHED_BENCH_DSN
# Built as the Dockerfile builds it (static, stripped): the RSS rows measure the binary that ships.
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$work/jobsched" .
go build -o "$work/bench" ./scripts/bench
export JOBSCHED_BIN=$work/jobsched
[[ -x /usr/bin/time ]] || { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y time >&2; } # GNU time: the peak RSS of each run
# The memory part's reference: BENCH_REF (default be8acfe, before queues, the Lease and Kueue) built the same way.
if [[ -z $only || ,$only, == *,memory,* ]]; then
	BENCH_REF=$(git rev-parse --short "${BENCH_REF:-be8acfe}")
	mkdir "$work/ref"
	git archive "$BENCH_REF" | tar -x -C "$work/ref"
	(cd "$work/ref" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$work/jobsched-$BENCH_REF" .)
	export BENCH_REF JOBSCHED_REF_BIN=$work/jobsched-$BENCH_REF
fi
# The pickup part's reference: BENCH_PICKUP_REF (default de8d9ba, the build before source.notify), built the same way.
if [[ ,$only, == *,pickup,* ]]; then
	BENCH_PICKUP_REF=$(git rev-parse --short "${BENCH_PICKUP_REF:-de8d9ba}")
	mkdir "$work/pickup-ref"
	git archive "$BENCH_PICKUP_REF" | tar -x -C "$work/pickup-ref"
	(cd "$work/pickup-ref" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$work/jobsched-$BENCH_PICKUP_REF" .)
	export BENCH_PICKUP_REF JOBSCHED_PICKUP_REF_BIN=$work/jobsched-$BENCH_PICKUP_REF
fi
# The fill part's reference: BENCH_FILL_REF (default a225b90, where every refill is a whole pass), built the same way.
if [[ ,$only, == *,fill,* ]]; then
	BENCH_FILL_REF=$(git rev-parse --short "${BENCH_FILL_REF:-a225b90}")
	mkdir "$work/fill-ref"
	git archive "$BENCH_FILL_REF" | tar -x -C "$work/fill-ref"
	(cd "$work/fill-ref" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$work/jobsched-$BENCH_FILL_REF" .)
	export BENCH_FILL_REF JOBSCHED_FILL_REF_BIN=$work/jobsched-$BENCH_FILL_REF
fi

pg=$("$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)/postgres" --version 2>/dev/null || echo "PostgreSQL ?")
commit=$(git rev-parse --short HEAD)
if [[ -n $(git status --porcelain --untracked-files=no) ]]; then commit="$commit with uncommitted changes"; fi
BENCH_MACHINE="Machine: $(nproc) cores ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo);\
 $(go version | cut -d' ' -f3), kube-apiserver $("$CACHE"/k8s-v1.37.2/kube-apiserver --version | cut -d' ' -f2), $pg;\
 everything on the same machine; $(date -u +%Y-%m-%d), commit $commit."
export BENCH_MACHINE
echo "$BENCH_MACHINE"
echo

# The drain first: its Jobs must make pods, so it runs while the controller-manager does.
if [[ -z $only || ,$only, == *,drain,* ]]; then
	"$work/bench" drain
	echo
fi
# The autoscaled drain next, on Karpenter's nodes; then Karpenter is stopped, so that it takes no CPU from the rest.
if [[ -n $karpenter ]]; then
	if [[ -z $only || ,$only, == *,autoscale,* ]]; then
		"$work/bench" autoscale
		echo
	fi
	# The mixed drain on Karpenter's nodes, only when asked for (scripts/bench/sizes_autoscale.go).
	if [[ ,$only, == *,sizes-autoscale,* ]]; then
		"$work/bench" sizes-autoscale
		echo
	fi
	pidfile=$JOBSCHED_CLUSTER_DIR/pids/karpenter.pid
	if [[ -f $pidfile ]] && pid=$(cat "$pidfile") && [[ $(readlink "/proc/$pid/exe" 2>/dev/null) == */karpenter-kwok ]]; then
		kill -TERM "$pid"
		echo "[bench] stopped Karpenter (pid $pid)" >&2
	fi
fi
# The mixed drain, only when asked for: per-row sizes against one template (its Jobs make pods too).
if [[ ,$only, == *,sizes,* ]]; then
	"$work/bench" sizes
	echo
fi
# A pass's cost with per-row sizes, only when asked for (in process: a fake API server, the real PostgreSQL).
if [[ ,$only, == *,sizes-pass,* ]]; then
	"$work/bench" sizes-pass
	echo
fi
# The fill at cluster scale, only when asked for (it grows a cluster of thousands of nodes): its Jobs make pods too.
if [[ ,$only, == *,fill,* ]]; then
	"$work/bench" fill
	echo
fi
rest=,$only,
rest=${rest//,drain,/,}
rest=${rest//,fill,/,}
rest=${rest//,sizes,/,}
rest=${rest//,autoscale,/,}
rest=${rest//,sizes-autoscale,/,}
rest=${rest//,sizes-pass,/,}
if [[ -n $only && $rest == , ]]; then exit 0; fi # only the parts that need the controller-manager

pidfile=$JOBSCHED_CLUSTER_DIR/pids/kube-controller-manager.pid
if [[ -f $pidfile ]] && pid=$(cat "$pidfile") && [[ $(readlink "/proc/$pid/exe" 2>/dev/null) == */kube-controller-manager ]]; then
	kill -TERM "$pid"
	echo "[bench] stopped the controller-manager (pid $pid): the Jobs make no pods" >&2
fi
# The pickup, only when asked for (it runs for about 45 minutes): its Jobs make no pods.
if [[ ,$only, == *,pickup,* ]]; then
	"$work/bench" pickup
	echo
	rest=${rest//,pickup,/,}
	if [[ $rest == , ]]; then exit 0; fi
fi
"$work/bench"
