// Package e2e holds jobsched's end-to-end tests. They run behind the build tag "integration" against a real local
// control plane (scripts/cluster.sh: kube-apiserver, kube-controller-manager, kube-scheduler, kwok) and a real
// PostgreSQL (scripts/postgres.sh), drive the real jobsched binary, and assert what the API server and the database
// show. scripts/test.sh starts both and runs them.
package e2e
