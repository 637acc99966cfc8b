// Package kwokkit drives the local control plane's kwok fake nodes for the programs that run task pods there.
//
// It writes the Jobs and reads the nodes for the end-to-end tests (pkg/e2e) and the bench (scripts/bench). It imports nothing of
// jobsched. Only tests and the bench import it.
package kwokkit

import (
	"cmp"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Job is a Job template: backoffLimit 0, a task pod that kwok runs for Duration (default 2s) and then fails when
// Fail says so ("true"; "first": attempt 1 only), with PodSpec (YAML at column 0: nodeSelector, containers, …)
// besides restartPolicy Never.
type Job struct {
	Duration, Fail, PodSpec string
}

// YAML is the template as written to a file.
func (j Job) YAML() string {
	fail := ""
	if j.Fail != "" {
		fail = fmt.Sprintf("\n        jobsched.io/kwok-fail: %q", j.Fail)
	}
	return fmt.Sprintf(`apiVersion: batch/v1
kind: Job
spec:
  backoffLimit: 0
  template:
    metadata:
      annotations:
        jobsched.io/kwok-duration: %q%s
    spec:
      restartPolicy: Never
`, cmp.Or(j.Duration, "2s"), fail) + Indent(j.PodSpec, "      ")
}

// Task is the pod of a plain task: on the nodes whose label PoolLabel is Pool (any node when Pool is ""), one
// container named Container (default worker) of Image (default worker:1) with CPU (default 100m) and Memory
// (default 64Mi) requests.
type Task struct {
	PoolLabel, Pool               string
	Container, Image, CPU, Memory string
}

// PodSpec is the task's pod spec, YAML at column 0 (see Job).
func (t Task) PodSpec() string {
	sel := ""
	if t.Pool != "" {
		sel = "nodeSelector:\n  " + t.PoolLabel + ": " + t.Pool + "\n"
	}
	return sel + fmt.Sprintf(`containers:
- name: %s
  image: %s
  resources:
    requests:
      cpu: %s
      memory: %s
`, cmp.Or(t.Container, "worker"), cmp.Or(t.Image, "worker:1"), cmp.Or(t.CPU, "100m"), cmp.Or(t.Memory, "64Mi"))
}

// Indent puts prefix before each line of s.
func Indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = prefix + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}

// NodeUsable says whether kube-scheduler (and jobsched's capacity) would place a pod on n: Ready, and without the
// taint the node lifecycle controller puts on a node until it is (not ready, unreachable).
func NodeUsable(n *corev1.Node) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
			return false
		}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// Unschedulable says kube-scheduler found no node for p: condition PodScheduled False, reason Unschedulable.
func Unschedulable(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return true
		}
	}
	return false
}
