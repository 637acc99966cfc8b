#!/usr/bin/env bash
# The demo: on a fresh machine, build jobsched, bring up the local control plane and PostgreSQL, fill a tasks table,
# and run `jobsched tick` as the CronJob would (every few seconds instead of every 3 minutes), with a stand-in worker
# that marks each row done when its pod succeeds. Row 1 is flaky: its first attempt fails, and it is retried after
# its backoff (a second scheduler, demo-flaky, whose fake pods fail on attempt 1). Shows `jobsched status` as the
# backlog drains.
#
#   scripts/demo.sh            ROWS=12 INTERVAL=5 (seconds between ticks)
#
# The first run builds the control plane (about 12 minutes on 2 cores; cached afterwards). The cluster and database
# keep running afterwards so you can look around; stop them with: scripts/cluster.sh down; scripts/postgres.sh down
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS=${ROWS:-12}
INTERVAL=${INTERVAL:-5}
CACHE=${JOBSCHED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/jobsched}
say() { printf '\n\033[1m== %s\033[0m\n' "$*" >&2; }

say "Building jobsched"
mkdir -p "$CACHE/demo"
go build -o "$CACHE/demo/jobsched" .
jobsched() { "$CACHE/demo/jobsched" --kubeconfig "$KUBECONFIG" --config "$CACHE/demo/jobsched.yaml" --log-format console "$@"; }
flaky() { "$CACHE/demo/jobsched" --kubeconfig "$KUBECONFIG" --config "$CACHE/demo/flaky.yaml" --log-format console "$@"; }

say "Starting PostgreSQL and the local cluster (one fake 4-CPU node)"
DATABASE_URL=$(scripts/postgres.sh up | tail -n 1)
KUBECONFIG=$(NODES=${NODES:-1} NODE_CPU=${NODE_CPU:-4} scripts/cluster.sh up | tail -n 1)
export DATABASE_URL KUBECONFIG
psql() { command psql "$DATABASE_URL" -v ON_ERROR_STOP=1 -qtA "$@"; }

say "Creating the tasks table with $ROWS waiting rows"
psql <<SQL
DROP TABLE IF EXISTS demo_tasks;
CREATE TABLE demo_tasks (id serial PRIMARY KEY, url text NOT NULL, status text NOT NULL DEFAULT 'waiting',
                         created_at timestamptz NOT NULL DEFAULT now());
INSERT INTO demo_tasks (url) SELECT 'https://example.com/report/' || i FROM generate_series(1, $ROWS) i;
SQL
kubectl --kubeconfig "$KUBECONFIG" create namespace demo --dry-run=client -o yaml | kubectl --kubeconfig "$KUBECONFIG" apply -f - >/dev/null

cat >"$CACHE/demo/jobsched.yaml" <<'YAML'
name: demo
namespace: demo
source:
  query: SELECT id, url, created_at FROM demo_tasks WHERE status = 'waiting' AND id <> 1 ORDER BY created_at, id
  key: id
job:
  template: job.yaml
env:
  prefix: TASK_
limits:
  maxActive: 6
  maxPerTick: 4
  capacity: nodes
gc:
  succeededRetention: 0s
retry:
  maxAttempts: 3
  backoff: 10s
YAML
# demo-flaky: the same, for row 1 only, with a template whose fake pod fails on attempt 1 (kwok-fail: first).
sed -e 's/^name: demo$/name: demo-flaky/' -e 's/AND id <> 1/AND id = 1/' -e 's/job.yaml/flaky-job.yaml/' \
  "$CACHE/demo/jobsched.yaml" >"$CACHE/demo/flaky.yaml"
cat >"$CACHE/demo/job.yaml" <<'YAML'
apiVersion: batch/v1
kind: Job
spec:
  backoffLimit: 0
  template:
    metadata:
      annotations:
        jobsched.io/kwok-duration: 8s   # the fake node runs each pod this long
    spec:
      restartPolicy: Never
      containers:
      - name: worker
        image: registry.example/report-worker:1
        resources:
          requests: {cpu: "1", memory: 256Mi}
YAML
sed 's|jobsched.io/kwok-duration: 8s.*|&\n        jobsched.io/kwok-fail: "first"   # attempt 1 fails, attempt 2 succeeds|' \
  "$CACHE/demo/job.yaml" >"$CACHE/demo/flaky-job.yaml"
: >"$CACHE/demo/flaky.log"
say "The plan for the first tick (dry-run: nothing is written)"
jobsched dry-run

# The stand-in worker: a real worker updates its row when its work is done; here, each succeeded pod's row is
# marked done (a failed pod leaves its row waiting, so the task is retried).
worker() {
  while sleep 1; do
    kubectl --kubeconfig "$KUBECONFIG" -n demo get pods -l 'jobsched.io/scheduler in (demo,demo-flaky)' \
      --field-selector=status.phase=Succeeded -o jsonpath='{range .items[*]}{.metadata.annotations.jobsched\.io/task-key}{"\n"}{end}' 2>/dev/null |
      while read -r key; do
        [[ "$key" =~ ^[0-9]+$ ]] && psql -c "UPDATE demo_tasks SET status = 'done' WHERE id = $key AND status = 'waiting'"
      done
  done
}
worker &
worker_pid=$!
trap 'kill $worker_pid 2>/dev/null || true' EXIT

say "Ticking every ${INTERVAL}s until every row is done and every finished Job is gone"
for round in $(seq 1 200); do
  say "tick $round"
  jobsched tick
  flaky tick --log-format json 2>&1 | tee -a "$CACHE/demo/flaky.log"
  jobsched status
  flaky status
  waiting=$(psql -c "SELECT count(*) FROM demo_tasks WHERE status <> 'done'")
  jobs=$(kubectl --kubeconfig "$KUBECONFIG" -n demo get jobs -l 'jobsched.io/scheduler in (demo,demo-flaky)' -o name | wc -l)
  if [[ "$waiting" == 0 && "$jobs" == 0 ]]; then
    say "Done: all $ROWS rows are done and every finished Job was cleaned up after $round ticks"
    echo "Row 1 failed on attempt 1 and was retried $(grep -c '"retried":1' "$CACHE/demo/flaky.log") time(s) (its pass done lines above)"
    psql -c "SELECT status, count(*) FROM demo_tasks GROUP BY status"
    echo "The cluster and database are still running: KUBECONFIG=$KUBECONFIG"
    echo "Stop them with: scripts/cluster.sh down; scripts/postgres.sh down"
    exit 0
  fi
  sleep "$INTERVAL"
done
echo "the backlog did not drain" >&2
exit 1
