#!/usr/bin/env bash
# The demo: on a fresh machine, build jobsched, bring up the local control plane and PostgreSQL, fill a tasks table,
# and run `jobsched tick` as the CronJob would (every few seconds instead of every 3 minutes), with a stand-in worker
# that marks each row done when its pod runs. Shows `jobsched status` as the backlog drains.
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
  query: SELECT id, url, created_at FROM demo_tasks WHERE status = 'waiting' ORDER BY created_at, id
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
  failedRetention: 1h
YAML
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
say "The plan for the first tick (dry-run: nothing is written)"
jobsched dry-run

# The stand-in worker: a real worker updates its row before it exits; here, each running pod's row is marked done.
worker() {
  while sleep 1; do
    kubectl --kubeconfig "$KUBECONFIG" -n demo get pods -l jobsched.io/scheduler=demo \
      --field-selector=status.phase=Running -o jsonpath='{range .items[*]}{.metadata.annotations.jobsched\.io/task-key}{"\n"}{end}' 2>/dev/null |
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
  jobsched status
  waiting=$(psql -c "SELECT count(*) FROM demo_tasks WHERE status <> 'done'")
  jobs=$(kubectl --kubeconfig "$KUBECONFIG" -n demo get jobs -l jobsched.io/scheduler=demo -o name | wc -l)
  if [[ "$waiting" == 0 && "$jobs" == 0 ]]; then
    say "Done: all $ROWS rows are done and every finished Job was cleaned up after $round ticks"
    psql -c "SELECT status, count(*) FROM demo_tasks GROUP BY status"
    echo "The cluster and database are still running: KUBECONFIG=$KUBECONFIG"
    echo "Stop them with: scripts/cluster.sh down; scripts/postgres.sh down"
    exit 0
  fi
  sleep "$INTERVAL"
done
echo "the backlog did not drain" >&2
exit 1
