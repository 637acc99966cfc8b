package capacity

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jobsched/jobsched/pkg/config"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
)

// node is a Ready, schedulable node with 4 cpu, 8Gi memory and 110 pods, nothing on it, changed by mods.
func node(name string, mods ...func(*Node)) Node {
	n := Node{
		Name:        name,
		Labels:      map[string]string{"kubernetes.io/hostname": name, "zone": "a", "gen": "5"},
		Ready:       true,
		Allocatable: rl("cpu", "4", "memory", "8Gi", "pods", "110"),
	}
	for _, m := range mods {
		m(&n)
	}
	return n
}

func nodes(ns ...Node) *Snapshot { return &Snapshot{Mode: config.CapacityNodes, Nodes: ns} }

// spec is a pod of one container requesting 1 cpu and 1Gi, changed by mods.
func spec(mods ...func(*corev1.PodSpec)) *corev1.PodSpec {
	s := &corev1.PodSpec{Containers: []corev1.Container{ctr(rl("cpu", "1", "memory", "1Gi"), nil)}}
	for _, m := range mods {
		m(s)
	}
	return s
}

func tolerate(t corev1.Toleration) func(*corev1.PodSpec) {
	return func(s *corev1.PodSpec) { s.Tolerations = append(s.Tolerations, t) }
}

func taint(t corev1.Taint) func(*Node) { return func(n *Node) { n.Taints = append(n.Taints, t) } }

var gpuTaint = corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}

// affinity requires the node to match any of terms.
func affinity(terms ...corev1.NodeSelectorTerm) func(*corev1.PodSpec) {
	return func(s *corev1.PodSpec) {
		s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
		}}
	}
}

func expr(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorTerm {
	return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: op, Values: values}}}
}

func quota(name string, hard, used corev1.ResourceList, mods ...func(*corev1.ResourceQuota)) corev1.ResourceQuota {
	q := corev1.ResourceQuota{}
	q.Name = name
	q.Spec.Hard, q.Status.Hard, q.Status.Used = hard, hard, used
	for _, m := range mods {
		m(&q)
	}
	return q
}

func withQuotas(s *Snapshot, qs ...corev1.ResourceQuota) *Snapshot { s.Quotas = qs; return s }

func withLimitRanges(s *Snapshot, lrs ...corev1.LimitRange) *Snapshot { s.LimitRanges = lrs; return s }

// job is a Job template with spec as its pod spec, changed by mods.
func job(spec *corev1.PodSpec, mods ...func(*batchv1.Job)) *batchv1.Job {
	j := &batchv1.Job{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: *spec}}}
	for _, m := range mods {
		m(j)
	}
	return j
}

const noNode = "no Ready, schedulable node matches the template"

func TestFit(t *testing.T) {
	tests := []struct {
		name             string
		spec             *corev1.PodSpec
		snap             *Snapshot
		unbound, podless int
		wantFit          int
		wantBinding      string
		wantExcluded     string // the nodes' Excluded, joined with "|"
		wantWarning      string // a substring of Warning
	}{
		{name: "nil snapshot (mode off)", spec: spec(), wantFit: -1, wantBinding: "capacity off"},
		{name: "one node, cpu binds", spec: spec(), snap: nodes(node("n1")), wantFit: 4, wantBinding: "cpu: 4 more fit on n1"},
		{name: "millicores", spec: spec(func(s *corev1.PodSpec) { s.Containers[0].Resources.Requests = rl("cpu", "300m") }),
			snap: nodes(node("n1", func(n *Node) { n.Requested = req("cpu", "3") })), wantFit: 3, wantBinding: "cpu: 3 more fit on n1"},
		{name: "no nodes", spec: spec(), snap: nodes(), wantFit: 0, wantBinding: noNode},

		{name: "taint not tolerated", spec: spec(), snap: nodes(node("n1", taint(gpuTaint))),
			wantFit: 0, wantBinding: noNode, wantExcluded: "taint dedicated=gpu:NoSchedule not tolerated"},
		{name: "taint tolerated by Equal", spec: spec(tolerate(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu", Effect: corev1.TaintEffectNoSchedule})),
			snap: nodes(node("n1", taint(gpuTaint))), wantFit: 4, wantBinding: "cpu: 4 more fit on n1"},
		{name: "taint tolerated by empty operator and empty effect", spec: spec(tolerate(corev1.Toleration{Key: "dedicated", Value: "gpu"})),
			snap: nodes(node("n1", taint(gpuTaint))), wantFit: 4, wantBinding: "cpu: 4 more fit on n1"},
		{name: "taint tolerated by Exists with empty key", spec: spec(tolerate(corev1.Toleration{Operator: corev1.TolerationOpExists})),
			snap: nodes(node("n1", taint(gpuTaint))), wantFit: 4, wantBinding: "cpu: 4 more fit on n1"},
		{name: "Equal toleration with another value", spec: spec(tolerate(corev1.Toleration{Key: "dedicated", Value: "cpu"})),
			snap: nodes(node("n1", taint(gpuTaint))), wantFit: 0, wantBinding: noNode, wantExcluded: "taint dedicated=gpu:NoSchedule not tolerated"},
		{name: "toleration of another effect", spec: spec(tolerate(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute})),
			snap: nodes(node("n1", taint(gpuTaint))), wantFit: 0, wantBinding: noNode, wantExcluded: "taint dedicated=gpu:NoSchedule not tolerated"},
		{name: "NoExecute taint not tolerated", spec: spec(),
			snap:    nodes(node("n1", taint(corev1.Taint{Key: "maintenance", Effect: corev1.TaintEffectNoExecute}))),
			wantFit: 0, wantBinding: noNode, wantExcluded: "taint maintenance:NoExecute not tolerated"},
		{name: "PreferNoSchedule taint ignored", spec: spec(),
			snap: nodes(node("n1", taint(corev1.Taint{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}))), wantFit: 4, wantBinding: "cpu: 4 more fit on n1"},
		// The hand-written copy compared Gt/Lt values; kube-scheduler 1.37 does only behind the alpha feature gate
		// TaintTolerationComparisonOperators (off), so such a toleration tolerates nothing.
		{name: "Gt toleration tolerates nothing while the feature gate is off", spec: spec(tolerate(corev1.Toleration{Key: "level", Operator: corev1.TolerationOpGt, Value: "3"})),
			snap:    nodes(node("n1", taint(corev1.Taint{Key: "level", Value: "5", Effect: corev1.TaintEffectNoSchedule}))),
			wantFit: 0, wantBinding: noNode, wantExcluded: "taint level=5:NoSchedule not tolerated"},

		{name: "cordoned", spec: spec(), snap: nodes(node("n1", func(n *Node) { n.Unschedulable = true })),
			wantFit: 0, wantBinding: noNode, wantExcluded: "cordoned"},
		{name: "cordoned but the unschedulable taint is tolerated",
			spec: spec(tolerate(corev1.Toleration{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists})),
			snap: nodes(node("n1", func(n *Node) { n.Unschedulable = true })), wantFit: 4, wantBinding: "cpu: 4 more fit on n1"},
		{name: "NotReady", spec: spec(), snap: nodes(node("n1", func(n *Node) { n.Ready = false }), node("n2")),
			wantFit: 4, wantBinding: "cpu: 4 more fit on n2", wantExcluded: "NotReady|"},
		{name: "nodeName elsewhere", spec: spec(func(s *corev1.PodSpec) { s.NodeName = "n2" }), snap: nodes(node("n1"), node("n2")),
			wantFit: 4, wantBinding: "cpu: 4 more fit on n2", wantExcluded: "nodeName|"},
		{name: "nodeSelector mismatch", spec: spec(func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"zone": "b"} }),
			snap: nodes(node("n1")), wantFit: 0, wantBinding: noNode, wantExcluded: "nodeSelector"},
		{name: "nodeSelector on a missing label", spec: spec(func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"disk": ""} }),
			snap: nodes(node("n1")), wantFit: 0, wantBinding: noNode, wantExcluded: "nodeSelector"},
		{name: "nodeSelector match", spec: spec(func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"zone": "a", "gen": "5"} }),
			snap: nodes(node("n1")), wantFit: 4, wantBinding: "cpu: 4 more fit on n1"},

		{name: "affinity In mismatch", spec: spec(affinity(expr("zone", corev1.NodeSelectorOpIn, "b", "c"))), snap: nodes(node("n1")), wantFit: 0, wantBinding: noNode, wantExcluded: "node affinity"},
		{name: "affinity In match", spec: spec(affinity(expr("zone", corev1.NodeSelectorOpIn, "b", "a"))), snap: nodes(node("n1")), wantFit: 4, wantBinding: "cpu: 4 more fit on n1"},
		{name: "affinity NotIn mismatch", spec: spec(affinity(expr("zone", corev1.NodeSelectorOpNotIn, "a"))), snap: nodes(node("n1")), wantFit: 0, wantBinding: noNode, wantExcluded: "node affinity"},
		{name: "affinity NotIn match on a missing label", spec: spec(affinity(expr("disk", corev1.NodeSelectorOpNotIn, "hdd"))), snap: nodes(node("n1")), wantFit: 4, wantBinding: "cpu: 4 more fit on n1"},
		{name: "affinity Exists mismatch", spec: spec(affinity(expr("gpu", corev1.NodeSelectorOpExists))), snap: nodes(node("n1")), wantFit: 0, wantBinding: noNode, wantExcluded: "node affinity"},
		{name: "affinity Exists match", spec: spec(affinity(expr("zone", corev1.NodeSelectorOpExists))), snap: nodes(node("n1")), wantFit: 4, wantBinding: "cpu: 4 more fit on n1"},
		{name: "affinity DoesNotExist mismatch", spec: spec(affinity(expr("zone", corev1.NodeSelectorOpDoesNotExist))), snap: nodes(node("n1")), wantFit: 0, wantBinding: noNode, wantExcluded: "node affinity"},
		{name: "affinity DoesNotExist match", spec: spec(affinity(expr("gpu", corev1.NodeSelectorOpDoesNotExist))), snap: nodes(node("n1")), wantFit: 4, wantBinding: "cpu: 4 more fit on n1"},
		{name: "affinity Gt mismatch", spec: spec(affinity(expr("gen", corev1.NodeSelectorOpGt, "5"))), snap: nodes(node("n1")), wantFit: 0, wantBinding: noNode, wantExcluded: "node affinity"},
		{name: "affinity Gt match", spec: spec(affinity(expr("gen", corev1.NodeSelectorOpGt, "4"))), snap: nodes(node("n1")), wantFit: 4, wantBinding: "cpu: 4 more fit on n1"},
		{name: "affinity Gt on a non-integer label", spec: spec(affinity(expr("zone", corev1.NodeSelectorOpGt, "4"))), snap: nodes(node("n1")), wantFit: 0, wantBinding: noNode, wantExcluded: "node affinity"},
		{name: "affinity Lt mismatch", spec: spec(affinity(expr("gen", corev1.NodeSelectorOpLt, "5"))), snap: nodes(node("n1")), wantFit: 0, wantBinding: noNode, wantExcluded: "node affinity"},
		{name: "affinity Lt match", spec: spec(affinity(expr("gen", corev1.NodeSelectorOpLt, "6"))), snap: nodes(node("n1")), wantFit: 4, wantBinding: "cpu: 4 more fit on n1"},
		{name: "affinity expressions ANDed", spec: spec(affinity(corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}},
			{Key: "gen", Operator: corev1.NodeSelectorOpIn, Values: []string{"6"}},
		}})), snap: nodes(node("n1")), wantFit: 0, wantBinding: noNode, wantExcluded: "node affinity"},
		{name: "affinity terms ORed", spec: spec(affinity(expr("zone", corev1.NodeSelectorOpIn, "b"), expr("gen", corev1.NodeSelectorOpIn, "5"))),
			snap: nodes(node("n1")), wantFit: 4, wantBinding: "cpu: 4 more fit on n1"},
		{name: "affinity matchFields on metadata.name", spec: spec(affinity(corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n2"}},
		}})), snap: nodes(node("n1"), node("n2")), wantFit: 4, wantBinding: "cpu: 4 more fit on n2", wantExcluded: "node affinity|"},
		{name: "affinity empty term matches nothing", spec: spec(affinity(corev1.NodeSelectorTerm{})), snap: nodes(node("n1")), wantFit: 0, wantBinding: noNode, wantExcluded: "node affinity"},

		{name: "full node", spec: spec(), snap: nodes(node("n1", func(n *Node) { n.Requested = req("cpu", "3500m", "memory", "1Gi") })),
			wantFit: 0, wantBinding: "cpu: 0 more fit on n1"},
		{name: "overcommitted node", spec: spec(), snap: nodes(node("n1", func(n *Node) { n.Requested = req("memory", "9Gi") })),
			wantFit: 0, wantBinding: "memory: 0 more fit on n1"},
		{name: "cpu and memory tie: the first is named", spec: spec(), snap: nodes(node("n1", func(n *Node) { n.Allocatable = rl("cpu", "4", "memory", "4Gi", "pods", "110") })),
			wantFit: 4, wantBinding: "cpu: 4 more fit on n1"},
		{name: "a resource and the pod slots tie: the resource is named", spec: spec(), snap: nodes(node("n1", func(n *Node) { n.Allocatable = rl("cpu", "4", "memory", "8Gi", "pods", "4") })),
			wantFit: 4, wantBinding: "cpu: 4 more fit on n1"},
		{name: "a zero request is no limit", spec: spec(func(s *corev1.PodSpec) { s.Containers[0].Resources.Requests = rl("cpu", "0", "memory", "2Gi") }),
			snap: nodes(node("n1")), wantFit: 4, wantBinding: "memory: 4 more fit on n1"},
		{name: "pod-count limit", spec: spec(), snap: nodes(node("n1", func(n *Node) { n.Pods = 108 })), wantFit: 2, wantBinding: "pods: 2 more fit on n1"},
		{name: "zero demand is limited by the pod count", spec: &corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}},
			snap: nodes(node("n1", func(n *Node) { n.Pods = 100 })), wantFit: 10, wantBinding: "pods: 10 more fit on n1"},
		{name: "node lacking the extended resource", spec: spec(func(s *corev1.PodSpec) { s.Containers[0].Resources.Limits = rl("nvidia.com/gpu", "1") }),
			snap:    nodes(node("n1"), node("n2", func(n *Node) { n.Allocatable["nvidia.com/gpu"] = rl("x", "2")["x"] })),
			wantFit: 2, wantBinding: "nodes: 2 more fit on 2 nodes (limited by nvidia.com/gpu on 2)", wantExcluded: "|"},
		{name: "unbound subtraction", spec: spec(), snap: nodes(node("n1"), node("n2")), unbound: 3,
			wantFit: 5, wantBinding: "nodes: 5 more fit on 2 nodes (limited by cpu on 2), after 3 unbound", wantExcluded: "|"},
		{name: "more unbound than room", spec: spec(), snap: nodes(node("n1")), unbound: 9, wantFit: 0, wantBinding: "cpu: 0 more fit on n1, after 9 unbound"},

		{name: "quota tighter than nodes", spec: spec(),
			snap:    withQuotas(nodes(node("n1")), quota("compute", rl("requests.memory", "4Gi", "requests.cpu", "10"), rl("requests.memory", "3Gi", "requests.cpu", "1"))),
			wantFit: 1, wantBinding: "quota compute/requests.memory: 1 more"},
		{name: "quota bare cpu in millicores", spec: spec(func(s *corev1.PodSpec) { s.Containers[0].Resources.Requests = rl("cpu", "300m") }),
			snap:    withQuotas(nodes(node("n1")), quota("compute", rl("cpu", "2"), rl("cpu", "1"))),
			wantFit: 3, wantBinding: "quota compute/cpu: 3 more"},
		{name: "quota looser than nodes", spec: spec(),
			snap:    withQuotas(nodes(node("n1")), quota("compute", rl("requests.cpu", "100"), nil)),
			wantFit: 4, wantBinding: "cpu: 4 more fit on n1"},
		{name: "quota pods minus podless", spec: spec(), podless: 2,
			snap:    withQuotas(nodes(node("n1")), quota("objects", rl("pods", "10"), rl("pods", "7"))),
			wantFit: 1, wantBinding: "quota objects/pods: 1 more"},
		{name: "quota count/jobs.batch is charged at creation: podless not subtracted", spec: spec(), podless: 2,
			snap:    withQuotas(&Snapshot{Mode: config.CapacityQuota}, quota("objects", rl("count/jobs.batch", "10"), rl("count/jobs.batch", "8"))),
			wantFit: 2, wantBinding: "quota objects/count/jobs.batch: 2 more"},
		{name: "quota limits.cpu from limits", spec: spec(func(s *corev1.PodSpec) { s.Containers[0].Resources.Limits = rl("cpu", "2") }),
			snap:    withQuotas(nodes(node("n1", func(n *Node) { n.Allocatable = rl("cpu", "64", "memory", "64Gi", "pods", "110") })), quota("compute", rl("limits.cpu", "7"), rl("limits.cpu", "1"))),
			wantFit: 3, wantBinding: "quota compute/limits.cpu: 3 more"},
		{name: "quota limits.memory without a limit counts 0 and warns", spec: spec(),
			snap:    withQuotas(nodes(node("n1")), quota("compute", rl("limits.memory", "1Gi"), rl("limits.memory", "1Gi"))),
			wantFit: 4, wantBinding: "cpu: 4 more fit on n1", wantWarning: "quota compute constrains limits.memory but the template sets none"},
		{name: "quota limits.memory with a LimitRange default limit", spec: spec(),
			snap: withLimitRanges(withQuotas(nodes(node("n1")), quota("compute", rl("limits.memory", "3Gi"), rl("limits.memory", "1Gi"))),
				limitRange("defaults", nil, rl("memory", "1Gi"))),
			wantFit: 2, wantBinding: "quota compute/limits.memory: 2 more"},
		{name: "quota on an extended resource", spec: spec(func(s *corev1.PodSpec) { s.Containers[0].Resources.Limits = rl("nvidia.com/gpu", "1") }),
			snap:    withQuotas(&Snapshot{Mode: config.CapacityQuota}, quota("gpu", rl("requests.nvidia.com/gpu", "4"), rl("requests.nvidia.com/gpu", "4"))),
			wantFit: 0, wantBinding: "quota gpu/requests.nvidia.com/gpu: 0 more"},
		{name: "quota scoped to BestEffort does not charge our pods", spec: spec(),
			snap: withQuotas(nodes(node("n1")), quota("no-besteffort", rl("pods", "0"), nil, func(q *corev1.ResourceQuota) {
				q.Spec.Scopes = []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}
			})), wantFit: 4, wantBinding: "cpu: 4 more fit on n1"},
		{name: "quota scoped to a PriorityClass charges pods of that class", spec: spec(func(s *corev1.PodSpec) { s.PriorityClassName = "high" }),
			snap: withQuotas(nodes(node("n1")), quota("high", rl("pods", "2"), nil, func(q *corev1.ResourceQuota) {
				q.Spec.ScopeSelector = &corev1.ScopeSelector{MatchExpressions: []corev1.ScopedResourceSelectorRequirement{
					{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"high"}},
				}}
			})), wantFit: 2, wantBinding: "quota high/pods: 2 more"},
		{name: "mode quota only", spec: spec(),
			snap:    withQuotas(&Snapshot{Mode: config.CapacityQuota}, quota("compute", rl("requests.cpu", "10"), rl("requests.cpu", "4"))),
			wantFit: 6, wantBinding: "quota compute/requests.cpu: 6 more"},
		{name: "mode quota without quotas", spec: spec(), snap: &Snapshot{Mode: config.CapacityQuota}, wantFit: -1, wantBinding: "no node or quota limit applies"},
		{name: "nodes forbidden: quota fallback warns", spec: spec(),
			snap:    withQuotas(&Snapshot{Mode: config.CapacityQuota, Warnings: []string{"capacity nodes needs list on nodes"}}, quota("compute", rl("pods", "5"), nil)),
			wantFit: 5, wantBinding: "quota compute/pods: 5 more", wantWarning: "capacity nodes needs list on nodes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Fit(job(tt.spec), tt.snap, tt.unbound, tt.podless)
			if r.Fit != tt.wantFit || r.Binding != tt.wantBinding {
				t.Errorf("Fit() = %d %q, want %d %q", r.Fit, r.Binding, tt.wantFit, tt.wantBinding)
			}
			placesFit(t, r, func() *Placer {
				return NewPlacer(tt.snap, []Claim{{Template: job(tt.spec), Unbound: tt.unbound, Podless: tt.podless}})
			})
			var excluded []string
			for _, n := range r.Nodes {
				excluded = append(excluded, n.Excluded)
			}
			if got := strings.Join(excluded, "|"); got != tt.wantExcluded {
				t.Errorf("Excluded = %q, want %q", got, tt.wantExcluded)
			}
			if !strings.Contains(r.Warning, tt.wantWarning) || tt.wantWarning == "" && r.Warning != "" {
				t.Errorf("Warning = %q, want it to contain %q", r.Warning, tt.wantWarning)
			}
		})
	}
}

// TestFitReport compares a whole Report, and its JSON form.
func TestFitReport(t *testing.T) {
	snap := withQuotas(nodes(
		node("n2", func(n *Node) { n.Requested, n.Pods = req("cpu", "1", "memory", "6Gi"), 3 }),
		node("n1", taint(gpuTaint)),
	), quota("compute", rl("requests.cpu", "10", "services", "5"), rl("requests.cpu", "2")))
	got := Fit(job(spec()), snap, 0, 1)
	want := Report{
		Fit:     1,
		Binding: "memory: 1 more fit on n2, after 1 unbound",
		Demand:  rl("cpu", "1", "memory", "1Gi"),
		Nodes: []NodeFit{
			{Name: "n1", Excluded: "taint dedicated=gpu:NoSchedule not tolerated"},
			{Name: "n2", Fits: 2, Limit: "memory", Free: fr("cpu", "3", "memory", "2Gi", "pods", "107")},
		},
		Quota: []QuotaFit{{Name: "compute", Resource: "requests.cpu", Fits: 7}},
	}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("Fit() =\n%+v\nwant\n%+v", got, want)
	}
	b, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	const wantJSON = `{"fit":1,"binding":"memory: 1 more fit on n2, after 1 unbound","demand":{"cpu":"1","memory":"1Gi"},` +
		`"nodes":[{"name":"n1","fits":0,"excluded":"taint dedicated=gpu:NoSchedule not tolerated"},` +
		`{"name":"n2","fits":2,"limit":"memory","free":{"cpu":"3","memory":"2Gi","pods":"107"}}],` +
		`"quota":[{"name":"compute","resource":"requests.cpu","fits":7}]}`
	if string(b) != wantJSON {
		t.Errorf("JSON =\n%s\nwant\n%s", b, wantJSON)
	}
}

// withNextPassPod keeps room for the next pass's own pod of 50m cpu and 64Mi, changed by mods.
func withNextPassPod(s *Snapshot, mods ...func(*corev1.PodSpec)) *Snapshot {
	spec := &corev1.PodSpec{Containers: []corev1.Container{ctr(rl("cpu", "50m", "memory", "64Mi"), nil)}} // the CronJob's
	for _, m := range mods {
		m(spec)
	}
	s.NextPassPod = &corev1.Pod{Spec: *spec}
	return s
}

func pending(ns, name string, demand corev1.ResourceList, mods ...func(*corev1.PodSpec)) Pending {
	p := Pending{Namespace: ns, Name: name, Demand: demand}
	for _, m := range mods {
		m(&p.Spec)
	}
	return p
}

func withPending(s *Snapshot, ps ...Pending) *Snapshot { s.Pending = ps; return s }

// TestFitAdmission: the template is counted as the API server admits it, and in Jobs.
func TestFitAdmission(t *testing.T) {
	noRequests := &corev1.PodSpec{Containers: []corev1.Container{{Name: "worker"}}}
	withSidecar := noRequests.DeepCopy()
	withSidecar.InitContainers = []corev1.Container{sidecar(rl("cpu", "500m"))}
	parallel := func(p int32) func(*batchv1.Job) { return func(j *batchv1.Job) { j.Spec.Parallelism = &p } }
	tests := []struct {
		name             string
		job              *batchv1.Job
		snap             *Snapshot
		unbound, podless int
		wantFit          int
		wantBinding      string
	}{
		{name: "no requests and no LimitRange: the pod slots bind", job: job(noRequests),
			snap: nodes(node("n1")), wantFit: 110, wantBinding: "pods: 110 more fit on n1"},
		// The measurement: one 4-CPU node, a LimitRange default of 1 CPU, a template without requests plus a
		// 500m sidecar: 1.5 CPU per pod, so 2 fit (the hand-written copy counted 500m: 8).
		{name: "LimitRange default and a restartable sidecar", job: job(withSidecar),
			snap:    withLimitRanges(nodes(node("n1")), limitRange("defaults", rl("cpu", "1"), rl("cpu", "1"))),
			wantFit: 2, wantBinding: "cpu: 2 more fit on n1"},
		{name: "RuntimeClass overhead", job: job(spec(func(s *corev1.PodSpec) { s.RuntimeClassName = ptr.To("kata") })),
			snap: func() *Snapshot {
				s := nodes(node("n1"))
				s.RuntimeClasses = map[string]*nodev1.RuntimeClass{"kata": runtimeClass(rl("cpu", "250m"))}
				return s
			}(),
			wantFit: 3, wantBinding: "cpu: 3 more fit on n1"},
		{name: "Jobs of 2 pods on the nodes", job: job(spec(), parallel(2)),
			snap: nodes(node("n1"), node("n2")), unbound: 1, podless: 2,
			wantFit: 2, wantBinding: "nodes: 5 more fit on 2 nodes (limited by cpu on 2), after 3 unbound (2 Job(s) of 2 pods)"},
		{name: "Jobs of 2 pods under a pods quota", job: job(spec(), parallel(2)),
			snap:    withQuotas(&Snapshot{Mode: config.CapacityQuota}, quota("objects", rl("pods", "10"), rl("pods", "3"))),
			podless: 2, wantFit: 2, wantBinding: "quota objects/pods: 2 more"},
		{name: "Jobs of 2 pods under a Job-count quota: counted in Jobs", job: job(spec(), parallel(2)),
			snap:    withQuotas(&Snapshot{Mode: config.CapacityQuota}, quota("objects", rl("count/jobs.batch", "10"), rl("count/jobs.batch", "7"))),
			podless: 2, wantFit: 3, wantBinding: "quota objects/count/jobs.batch: 3 more"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Fit(tt.job, tt.snap, tt.unbound, tt.podless)
			if r.Fit != tt.wantFit || r.Binding != tt.wantBinding {
				t.Errorf("Fit() = %d %q, want %d %q", r.Fit, r.Binding, tt.wantFit, tt.wantBinding)
			}
			placesFit(t, r, func() *Placer {
				return NewPlacer(tt.snap, []Claim{{Template: tt.job, Unbound: tt.unbound, Podless: tt.podless}})
			})
		})
	}
}

// TestFitTick: room for the next tick's pod is kept on the nodes it may use, whatever node kube-scheduler picks for
// each of our pods.
func TestFitTick(t *testing.T) {
	gpuOnly := func(s *corev1.PodSpec) {
		s.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
	}
	tests := []struct {
		name        string
		spec        *corev1.PodSpec
		snap        *Snapshot
		unbound     int
		wantFit     int
		wantBinding string
		wantTick    string
	}{
		{name: "one full node: one pod less", spec: spec(), snap: withNextPassPod(nodes(node("n1"))),
			wantFit: 3, wantBinding: "tick: 3 more pod(s) fit on 1 node(s) with room kept for the next tick",
			wantTick: "room kept for the next tick (cpu=50m memory=64Mi) on one of 1 node(s)"},
		{name: "two nodes: still only one pod less", spec: spec(), snap: withNextPassPod(nodes(node("n1"), node("n2"))),
			wantFit: 7, wantBinding: "tick: 7 more pod(s) fit on 2 node(s) with room kept for the next tick",
			wantTick: "room kept for the next tick (cpu=50m memory=64Mi) on one of 2 node(s)"},
		{name: "after our unbound pods", spec: spec(), snap: withNextPassPod(nodes(node("n1"), node("n2"))), unbound: 2,
			wantFit: 5, wantBinding: "tick: 5 more pod(s) fit on 2 node(s) with room kept for the next tick, after 2 unbound",
			wantTick: "room kept for the next tick (cpu=50m memory=64Mi) on one of 2 node(s)"},
		{name: "a node keeps room beside our pods anyway: nothing kept",
			spec: spec(), snap: withNextPassPod(nodes(node("n1"), node("n2", func(n *Node) { n.Requested = req("cpu", "500m") }))),
			wantFit: 7, wantBinding: "nodes: 7 more fit on 2 nodes (limited by cpu on 2)",
			wantTick: "the next tick (cpu=50m memory=64Mi) fits on n2 beside our pods"},
		{name: "a tick larger than our pods costs more than one", spec: spec(func(s *corev1.PodSpec) { s.Containers[0].Resources.Requests = rl("cpu", "100m") }),
			snap:    withNextPassPod(nodes(node("n1")), func(s *corev1.PodSpec) { s.Containers[0].Resources.Requests = rl("cpu", "250m") }),
			wantFit: 37, wantBinding: "tick: 37 more pod(s) fit on 1 node(s) with room kept for the next tick",
			wantTick: "room kept for the next tick (cpu=250m) on one of 1 node(s)"},
		{name: "the tick fits nowhere even now: nothing more", spec: spec(),
			snap:    withNextPassPod(nodes(node("n1", func(n *Node) { n.Requested = req("cpu", "3980m") }))),
			wantFit: 0, wantBinding: "cpu: 0 more fit on n1",
			wantTick: "room kept for the next tick (cpu=50m memory=64Mi) on one of 1 node(s)"},
		{name: "the tick may not use our nodes: nothing kept", spec: spec(gpuOnly),
			snap:    withNextPassPod(nodes(node("n1", taint(gpuTaint)))),
			wantFit: 4, wantBinding: "cpu: 4 more fit on n1",
			wantTick: "the next tick runs on none of the template's nodes: no room kept"},
		// This pass's pod holds 50m on n1 (counted); once it ends, a 4th pod of ours could take its room, so one
		// node of 4 still holds only 3 (the same as with this pod counted: no pod is lost to the reservation).
		{name: "this pass's pod on the node: its room comes back", spec: spec(),
			snap: withNextPassPod(nodes(node("n1", func(n *Node) { n.Requested, n.Pods = req("cpu", "50m", "memory", "64Mi"), 1 })),
				func(s *corev1.PodSpec) { s.NodeName = "n1" }),
			wantFit: 3, wantBinding: "cpu: 3 more fit on n1",
			wantTick: "room kept for the next tick (cpu=50m memory=64Mi) on one of 1 node(s)"},
		{name: "this pass's pod on the node: its room is the next tick's", spec: spec(func(s *corev1.PodSpec) { s.Containers[0].Resources.Requests = rl("cpu", "1975m") }),
			snap: withNextPassPod(nodes(node("n1", func(n *Node) { n.Requested, n.Pods = req("cpu", "50m", "memory", "64Mi"), 1 })),
				func(s *corev1.PodSpec) { s.NodeName = "n1" }),
			wantFit: 2, wantBinding: "cpu: 2 more fit on n1",
			wantTick: "the next tick (cpu=50m memory=64Mi) fits on n1 beside our pods"},
		// The tick asks for a GPU, which only n2 has and our pods do not ask for: only n2 can keep its room, so only
		// what fits beside it there is safe.
		{name: "the tick needs a resource our pods do not", spec: spec(),
			snap: withNextPassPod(nodes(node("n1"), node("n2", func(n *Node) { n.Allocatable = rl("cpu", "4", "memory", "8Gi", "pods", "110", "example.com/gpu", "1") })),
				func(s *corev1.PodSpec) { s.Containers[0].Resources.Requests = rl("cpu", "50m", "example.com/gpu", "1") }),
			wantFit: 3, wantBinding: "tick: 3 more pod(s) fit on 2 node(s) with room kept for the next tick",
			wantTick: "room kept for the next tick (cpu=50m example.com/gpu=1) on one of 2 node(s)"},
		// kube-scheduler could put all our pods on n2: only what fits on n2 beside the tick is safe.
		{name: "the tick pinned to one of our nodes: what fits beside it there", spec: spec(),
			snap: withNextPassPod(nodes(node("n1"), node("n2")), func(s *corev1.PodSpec) {
				s.NodeSelector = map[string]string{"kubernetes.io/hostname": "n2"}
			}),
			wantFit: 3, wantBinding: "tick: 3 more pod(s) fit on 2 node(s) with room kept for the next tick",
			wantTick: "room kept for the next tick (cpu=50m memory=64Mi) on one of 1 node(s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Fit(job(tt.spec), tt.snap, tt.unbound, 0)
			if r.Fit != tt.wantFit || r.Binding != tt.wantBinding || r.Tick != tt.wantTick {
				t.Errorf("Fit() = %d %q tick %q, want %d %q tick %q", r.Fit, r.Binding, r.Tick, tt.wantFit, tt.wantBinding, tt.wantTick)
			}
			placesFit(t, r, func() *Placer { return NewPlacer(tt.snap, []Claim{{Template: job(tt.spec), Unbound: tt.unbound}}) })
		})
	}
}

// TestFitPending: others' pods bound to no node yet take room on the nodes they could land on.
func TestFitPending(t *testing.T) {
	tests := []struct {
		name        string
		snap        *Snapshot
		wantFit     int
		wantPending []PendingFit
	}{
		{name: "takes its requests", snap: withPending(nodes(node("n1")), pending("other", "p", rl("cpu", "1500m"))),
			wantFit: 2, wantPending: []PendingFit{{Pod: "other/p", Node: "n1", Costs: 2}}},
		{name: "its nodeSelector matches none of our nodes", wantFit: 4,
			snap: withPending(nodes(node("n1")), pending("other", "p", rl("cpu", "1500m"), func(s *corev1.PodSpec) {
				s.NodeSelector = map[string]string{"zone": "b"}
			}))},
		{name: "its required affinity matches one of our nodes", wantFit: 6,
			snap:        withPending(nodes(node("n1"), node("n2")), pending("other", "p", rl("cpu", "1500m"), affinity(expr("kubernetes.io/hostname", corev1.NodeSelectorOpIn, "n2")))),
			wantPending: []PendingFit{{Pod: "other/p", Node: "n2", Costs: 2}}},
		{name: "a taint it does not tolerate", snap: withPending(nodes(node("n1", taint(gpuTaint))), pending("other", "p", rl("cpu", "1")))},
		{name: "too large for any of our nodes now", wantFit: 4, snap: withPending(nodes(node("n1")), pending("other", "p", rl("cpu", "5")))},
		{name: "goes where it costs us the most", wantFit: 6,
			snap:        withPending(nodes(node("n1"), node("n2", func(n *Node) { n.Requested = req("cpu", "500m") })), pending("other", "p", rl("cpu", "500m"))),
			wantPending: []PendingFit{{Pod: "other/p", Node: "n1", Costs: 1}}},
		{name: "exactly the node's room", wantFit: 0, snap: withPending(nodes(node("n1")), pending("other", "p", rl("cpu", "4"))),
			wantPending: []PendingFit{{Pod: "other/p", Node: "n1", Costs: 4}}},
		{name: "the node's last pod slot", wantFit: 0,
			snap:        withPending(nodes(node("n1", func(n *Node) { n.Pods = 109 })), pending("other", "p", rl("cpu", "500m"))),
			wantPending: []PendingFit{{Pod: "other/p", Node: "n1", Costs: 1}}},
		{name: "a pod slot is what it costs where slots bind", wantFit: 2,
			snap:        withPending(nodes(node("n1", func(n *Node) { n.Allocatable[corev1.ResourcePods] = rl("pods", "3")["pods"] })), pending("other", "p", rl("cpu", "500m"))),
			wantPending: []PendingFit{{Pod: "other/p", Node: "n1", Costs: 1}}},
		{name: "a tie goes to the first node", wantFit: 7,
			snap:        withPending(nodes(node("n1"), node("n2")), pending("other", "p", rl("cpu", "1"))),
			wantPending: []PendingFit{{Pod: "other/p", Node: "n1", Costs: 1}}},
		// Our pods do not ask for the GPU: the pod that does still finds it on n2, and only there.
		{name: "a resource only it requests", wantFit: 6,
			snap: withPending(nodes(node("n1"), node("n2", func(n *Node) { n.Allocatable = rl("cpu", "4", "memory", "8Gi", "pods", "110", "example.com/gpu", "1") })),
				pending("other", "p", rl("cpu", "1500m", "example.com/gpu", "1"))),
			wantPending: []PendingFit{{Pod: "other/p", Node: "n2", Costs: 2}}},
		{name: "a resource only it requests, used up", wantFit: 8,
			snap: withPending(nodes(node("n1"), node("n2", func(n *Node) {
				n.Allocatable, n.Requested = rl("cpu", "4", "memory", "8Gi", "pods", "110", "example.com/gpu", "1"), req("example.com/gpu", "1")
			})), pending("other", "p", rl("cpu", "1500m", "example.com/gpu", "1")))},
		{name: "one after the other", wantFit: 1,
			snap:        withPending(nodes(node("n1")), pending("other", "a", rl("cpu", "2")), pending("other", "b", rl("cpu", "1"))),
			wantPending: []PendingFit{{Pod: "other/a", Node: "n1", Costs: 2}, {Pod: "other/b", Node: "n1", Costs: 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Fit(job(spec()), tt.snap, 0, 0)
			if r.Fit != tt.wantFit || !equality.Semantic.DeepEqual(r.Pending, tt.wantPending) {
				t.Errorf("Fit() = %d, pending %+v; want %d, %+v (%s)", r.Fit, r.Pending, tt.wantFit, tt.wantPending, r.Binding)
			}
			placesFit(t, r, func() *Placer { return NewPlacer(tt.snap, []Claim{{Template: job(spec())}}) })
		})
	}
}

// BenchmarkFit is one pass's Fit on 5,000 nodes with 100 others' unbound pods and room kept for the next tick, with
// 10 and with 1,000 of our pods unbound (each placed on a node before the count). MB-held is what the pass holds of
// it while it runs: the live heap of the Placer and its Report after a collection.
func BenchmarkFit(b *testing.B) {
	ns := make([]Node, 5000)
	for i := range ns {
		ns[i] = node(fmt.Sprintf("node-%05d", i), func(n *Node) { n.Requested, n.Pods = req("cpu", "1500m", "memory", "3Gi"), 12 })
	}
	snap := withNextPassPod(nodes(ns...))
	for i := range 100 {
		snap.Pending = append(snap.Pending, pending("other", fmt.Sprintf("p%03d", i), rl("cpu", "1")))
	}
	tpl := job(spec())
	for _, unbound := range []int{10, 1000} {
		b.Run(fmt.Sprintf("unbound-%d", unbound), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if r := Fit(tpl, snap, unbound, 0); r.Fit <= 0 {
					b.Fatal(r.Binding)
				}
			}
			type placed struct {
				p *Placer
				r Report
			}
			held, pr := liveHeap(func() placed {
				p := NewPlacer(snap, []Claim{{Template: tpl, Unbound: unbound}})
				return placed{p, p.Report(0)}
			})
			if pr.r.Fit <= 0 {
				b.Fatal(pr.r.Binding)
			}
			b.ReportMetric(float64(held)/1e6, "MB-held")
		})
	}
}
