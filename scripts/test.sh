#!/usr/bin/env bash
# The test run: vet, golangci-lint, unit tests, then PostgreSQL and end-to-end tests against a real PostgreSQL, a real Prometheus
# Pushgateway, a real Prometheus scraping it and a real local control plane that this script starts (and builds
# once, cached outside the repo), with helm (built once, cached) and promtool for the chart and the alert rules.
#
#   scripts/test.sh              everything
#   scripts/test.sh -run Whole   extra arguments go to `go test` (e.g. one scenario)
#
# Environment: PARALLEL (default 8) is go test's -parallel: how many t.Parallel tests of a package run at once. The
# end-to-end scenarios wait on the cluster (pods that run for seconds, watches), not on the CPU, so they run more at
# once than the 2 cores GOMAXPROCS would allow; scripts/README.md, "The suite's critical path".
# KEEP=1 leaves the cluster, PostgreSQL, the Pushgateway and Prometheus running afterwards (faster reruns); otherwise
# whatever this script started it stops again, and whatever was already running it leaves alone.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[test] %s\n' "$*" >&2; }

log "gofmt, go vet"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.git/*'))
[[ -z $unformatted ]] || { printf '[test] not gofmt-formatted:\n%s\n' "$unformatted" >&2; exit 1; }
go vet ./...
go vet -tags integration ./...
log "golangci-lint (.golangci.yaml; built once and cached, like helm)"
scripts/lint.sh

log "the binary, built as the Dockerfile builds it"
scripts/check-image-build.sh

# GNU time: the bench measures a run's peak RSS with it, and its unit tests check that (scripts/bench/rss.go).
[[ -x /usr/bin/time ]] || { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y time >&2; }

started=()
cleanup() {
  [[ "${KEEP:-}" == 1 ]] && return
  for s in "${started[@]}"; do
    log "stopping $s"
    "scripts/$s.sh" down >&2 || true
  done
}
trap cleanup EXIT

if ! scripts/postgres.sh dsn >/dev/null 2>&1; then started+=(postgres); fi
JOBSCHED_TEST_DSN=$(scripts/postgres.sh up | tail -n 1)
if ! scripts/pushgateway.sh url >/dev/null 2>&1; then started+=(pushgateway); fi
JOBSCHED_TEST_PUSHGATEWAY=$(scripts/pushgateway.sh up | tail -n 1)
if ! scripts/prometheus.sh url >/dev/null 2>&1; then started+=(prometheus); fi
JOBSCHED_TEST_PROMETHEUS=$(JOBSCHED_PROM_PUSHGATEWAY=$JOBSCHED_TEST_PUSHGATEWAY scripts/prometheus.sh up | tail -n 1)
JOBSCHED_TEST_PROMETHEUS_RULES=$(scripts/prometheus.sh rules-dir)
JOBSCHED_TEST_PROMTOOL=$(scripts/prometheus.sh promtool | tail -n 1)
JOBSCHED_TEST_HELM=$(scripts/helm.sh path | tail -n 1)
# TestKueue and TestAutoscale start control planes of their own, with Kueue and with Karpenter; their binaries are
# built here, before the tests' timeout runs (JOBSCHED_KUEUE_CLUSTER_DIR, JOBSCHED_KARPENTER_CLUSTER_DIR: a state
# directory of their cluster to reuse, e.g. with KEEP=1).
KUEUE=1 KARPENTER=1 scripts/cluster.sh build
if ! scripts/cluster.sh kubeconfig >/dev/null 2>&1; then started+=(cluster); fi
KUBECONFIG=$(scripts/cluster.sh up | tail -n 1)
export JOBSCHED_TEST_DSN JOBSCHED_TEST_PUSHGATEWAY JOBSCHED_TEST_PROMETHEUS JOBSCHED_TEST_PROMETHEUS_RULES \
	JOBSCHED_TEST_PROMTOOL JOBSCHED_TEST_HELM KUBECONFIG

log "go test (unit, PostgreSQL and end-to-end)"
go test -tags integration -count=1 -timeout 60m -parallel "${PARALLEL:-8}" "$@" ./...
