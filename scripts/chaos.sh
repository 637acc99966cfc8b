#!/usr/bin/env bash
# The chaos run (issue 13): jobsched's passes SIGKILLed at random moments, one to three at once, while the
# kube-apiserver and PostgreSQL are SIGKILLed and restarted (PostgreSQL sometimes replaced for a few seconds by a
# listener that never answers); three schedulers (two in one namespace, one in another) with a stand-in worker,
# retries and failing tasks. The invariants are checked from the API server (a watch, and its audit log) and the
# database, and the figures are printed at the end. pkg/e2e/chaos_test.go (TestChaos) is the run; scripts/test.sh
# runs a short version of it.
#
#   scripts/chaos.sh                                        the full run: 1,000 killed passes, 20 + 20 restarts
#   KILLS=100 APISERVER_RESTARTS=3 DB_RESTARTS=3 scripts/chaos.sh   a smaller one
#
# It uses its OWN control plane and PostgreSQL (it kills them), never the shared ones of the test run:
#   JOBSCHED_CHAOS_CLUSTER_DIR  default $JOBSCHED_CACHE/cluster-chaos   (scripts/cluster.sh, with its audit log on)
#   JOBSCHED_CHAOS_PG_DIR       default $JOBSCHED_CACHE/postgres-chaos  (scripts/postgres.sh)
# Both are started fresh and stopped at the end (KEEP=1 leaves them up). Every output of every pass, the configs and
# the figures (report.txt) are kept in OUT (default a new directory under /tmp).
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[chaos] %s\n' "$*" >&2; }

CACHE=${JOBSCHED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/jobsched}
CLUSTER_DIR=${JOBSCHED_CHAOS_CLUSTER_DIR:-$CACHE/cluster-chaos}
PG_DIR=${JOBSCHED_CHAOS_PG_DIR:-$CACHE/postgres-chaos}
# The shared ones must never be killed or taken down from here.
if [[ $CLUSTER_DIR == "$CACHE/cluster" || $PG_DIR == "$CACHE/postgres" ]]; then
	log "ERROR: the chaos run needs its own cluster and PostgreSQL directories, not the shared ones"
	exit 2
fi
OUT=${OUT:-$(mktemp -d /tmp/jobsched-chaos.XXXXXX)}
mkdir -p "$OUT"

stop_all() {
	if [[ ${KEEP:-} == 1 ]]; then
		log "KEEP=1: cluster ($CLUSTER_DIR) and PostgreSQL ($PG_DIR) left running"
		return
	fi
	JOBSCHED_CLUSTER_DIR=$CLUSTER_DIR scripts/cluster.sh down || true
	JOBSCHED_PG_DIR=$PG_DIR scripts/postgres.sh down || true
}

log "a fresh control plane in $CLUSTER_DIR (audit log on) and PostgreSQL in $PG_DIR"
JOBSCHED_CLUSTER_DIR=$CLUSTER_DIR scripts/cluster.sh down
JOBSCHED_PG_DIR=$PG_DIR scripts/postgres.sh down
trap stop_all EXIT
KUBECONFIG=$(JOBSCHED_CLUSTER_DIR=$CLUSTER_DIR JOBSCHED_AUDIT=1 NODES=2 scripts/cluster.sh up | tail -n 1)
JOBSCHED_TEST_DSN=$(JOBSCHED_PG_DIR=$PG_DIR scripts/postgres.sh up | tail -n 1)
export KUBECONFIG JOBSCHED_TEST_DSN
export JOBSCHED_CHAOS_CLUSTER_DIR=$CLUSTER_DIR JOBSCHED_CHAOS_PG_DIR=$PG_DIR JOBSCHED_CHAOS_OUT=$OUT
export JOBSCHED_CHAOS_REPORT=$OUT/report.txt
export JOBSCHED_CHAOS_KILLS=${KILLS:-1000}
export JOBSCHED_CHAOS_APISERVER_RESTARTS=${APISERVER_RESTARTS:-20}
export JOBSCHED_CHAOS_DB_RESTARTS=${DB_RESTARTS:-20}

log "TestChaos: $JOBSCHED_CHAOS_KILLS killed passes, $JOBSCHED_CHAOS_APISERVER_RESTARTS API server and $JOBSCHED_CHAOS_DB_RESTARTS database restarts; outputs in $OUT"
rc=0
go test -tags integration -count=1 -timeout 3h -run '^TestChaos$' -v ./pkg/e2e/ >"$OUT/test.log" 2>&1 || rc=$?
grep -E '^\s+chaos_test.go:[0-9]+: [0-9]+[hms]' "$OUT/test.log" >&2 || true
if [[ -f $OUT/report.txt ]]; then
	cat "$OUT/report.txt"
else
	tail -n 60 "$OUT/test.log" >&2
fi
if ((rc != 0)); then
	log "FAILED (exit $rc); the whole log: $OUT/test.log"
else
	log "passed; the whole log: $OUT/test.log"
fi
exit "$rc"
