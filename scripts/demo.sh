#!/usr/bin/env bash
# The demo: on a fresh machine, build jobsched, bring up the local control plane and PostgreSQL, fill a tasks table,
# and run jobsched as the shipped CronJob does: `tick --fill-for` (a pass, then another each time one of its Jobs
# ends and frees room, until the time is up), started on a schedule: every SCHEDULE seconds here, every 3 minutes
# with --fill-for 2m in manifests/base/cronjob.yaml. A stand-in worker marks each row done once its pod runs. The
# install has two queues: reports (every row but 1) and flaky (row 1, whose first attempt fails: it is retried after
# its backoff). Shows `jobsched status` after each run.
#
#   scripts/demo.sh            ROWS=12 SCHEDULE=30 (seconds from one run's start to the next's) FILL_FOR=20s
#
# The first run builds the control plane (about 12 minutes on 2 cores; cached afterwards). The cluster and database
# keep running afterwards so you can look around; the last lines say how to stop them. State: scripts/cluster.sh
# and scripts/postgres.sh keep theirs in JOBSCHED_CLUSTER_DIR and JOBSCHED_PG_DIR (see each script); the demo's
# binary, config and log go to JOBSCHED_DEMO_DIR (default $JOBSCHED_CACHE/demo).
set -euo pipefail
cd "$(dirname "$0")/.."

ROWS=${ROWS:-12}
SCHEDULE=${SCHEDULE:-30}
FILL_FOR=${FILL_FOR:-20s}
CACHE=${JOBSCHED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/jobsched}
DIR=${JOBSCHED_DEMO_DIR:-$CACHE/demo}
say() { printf '\n\033[1m== %s\033[0m\n' "$*" >&2; }

say "Building jobsched"
mkdir -p "$DIR"
go build -o "$DIR/jobsched" .
jobsched() { "$DIR/jobsched" --kubeconfig "$KUBECONFIG" --config "$DIR/jobsched.yaml" --log-format console "$@"; }

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

# maxPerTick is above what fits (4 pods of 1 CPU), so the room binds each pass and --fill-for refills it.
cat >"$DIR/jobsched.yaml" <<'YAML'
name: demo
namespace: demo
source:
  timeout: 30s
env:
  prefix: TASK_
limits:
  maxActive: 6
  maxPerTick: 10
  capacity: nodes
gc:
  succeededRetention: 0s
retry:
  maxAttempts: 3
  backoff: 10s
queues:
- name: reports
  source:
    query: SELECT id, url, created_at FROM demo_tasks WHERE status = 'waiting' AND id <> 1 ORDER BY created_at, id
    key: id
  job:
    template: job.yaml
- name: flaky
  source:
    query: SELECT id, url, created_at FROM demo_tasks WHERE status = 'waiting' AND id = 1
    key: id
  job:
    template: flaky-job.yaml
YAML
cat >"$DIR/job.yaml" <<'YAML'
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
  "$DIR/job.yaml" >"$DIR/flaky-job.yaml"
: >"$DIR/ticks.log"
say "The plan for the first pass (dry-run: nothing is written)"
jobsched dry-run

# The stand-in worker: a real worker moves its row on when its work is done, before its pod exits. Here the work is
# done at once: each running pod's row is marked done, except on the flaky queue's attempt 1, which fails (its row
# stays waiting, so the task is retried).
worker() {
  while sleep 1; do
    kubectl --kubeconfig "$KUBECONFIG" -n demo get pods -l jobsched.io/scheduler=demo --field-selector=status.phase=Running \
      -o jsonpath='{range .items[*]}{.metadata.annotations.jobsched\.io/task-key} {.metadata.labels.jobsched\.io/queue} {.metadata.labels.jobsched\.io/attempt}{"\n"}{end}' 2>/dev/null |
      while read -r key queue attempt; do
        [[ "$queue/$attempt" == flaky/1 ]] && continue
        [[ "$key" =~ ^[0-9]+$ ]] && psql -c "UPDATE demo_tasks SET status = 'done' WHERE id = $key AND status = 'waiting'"
      done
  done
}
worker &
worker_pid=$!
trap 'kill $worker_pid 2>/dev/null || true' EXIT

say "Running the CronJob's command every ${SCHEDULE}s until every row is done and every finished Job is gone"
for run in $(seq 1 40); do
  started=$SECONDS
  say "run $run: jobsched tick --fill-for $FILL_FOR --timeout 20s"
  jobsched tick --fill-for "$FILL_FOR" --timeout 20s 2>&1 | tee -a "$DIR/ticks.log"
  jobsched status
  waiting=$(psql -c "SELECT count(*) FROM demo_tasks WHERE status <> 'done'")
  jobs=$(kubectl --kubeconfig "$KUBECONFIG" -n demo get jobs -l jobsched.io/scheduler=demo -o name | wc -l)
  if [[ "$waiting" == 0 && "$jobs" == 0 ]]; then
    say "Done: all $ROWS rows are done and every finished Job was cleaned up after $run runs"
    plain=$(sed 's/\x1b\[[0-9;]*m//g' "$DIR/ticks.log") # the console log's colours out
    echo "$(grep -c 'pass done' <<<"$plain") passes in $run runs; row 1 failed on attempt 1 and was retried ($(grep -c 'pass done.*retried=1' <<<"$plain") pass done line(s) with retried=1)"
    psql -c "SELECT status, count(*) FROM demo_tasks GROUP BY status"
    echo "The cluster and database are still running: KUBECONFIG=$KUBECONFIG"
    echo "Stop them with: scripts/cluster.sh down; scripts/postgres.sh down (with the same JOBSCHED_CLUSTER_DIR and JOBSCHED_PG_DIR)"
    exit 0
  fi
  sleep $((SCHEDULE > SECONDS - started ? SCHEDULE - (SECONDS - started) : 0))
done
echo "the backlog did not drain" >&2
exit 1
