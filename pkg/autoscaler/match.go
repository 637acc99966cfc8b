package autoscaler

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// wellKnown are the labels Karpenter gives every node from its instance type and offering, whose values a NodePool
// need not name (Karpenter's v1.WellKnownLabels): a pod may ask for any value of them. Labels of the cloud
// provider's own karpenter.* domains (karpenter.k8s.aws/instance-family, karpenter.kwok.sh/instance-size) are such
// labels too.
var wellKnown = []string{nodePoolLabel, corev1.LabelTopologyZone, corev1.LabelTopologyRegion, corev1.LabelInstanceTypeStable,
	corev1.LabelArchStable, corev1.LabelOSStable, "karpenter.sh/capacity-type", corev1.LabelWindowsBuild}

func isWellKnown(key string) bool {
	domain, _, ok := strings.Cut(key, "/")
	return slices.Contains(wellKnown, key) || ok && strings.Contains(domain, "karpenter.")
}

// Excluded says why a pod of spec may not land on a node the NodePool p makes, "" when it may: a NoSchedule or
// NoExecute taint of p's template it does not tolerate (startupTaints are removed before pods land), or a label its
// nodeSelector or required node affinity asks for that no node of p can carry. A node of p carries its template's
// labels, a value its requirements allow for each key they name, any value of a well-known label, and no other
// label. The candidate labels are checked with kube-scheduler's own helpers (component-helpers' nodeaffinity and
// taints), on both sides: a node of those labels must match the pod and p's requirements.
func (p *Pool) Excluded(spec *corev1.PodSpec) string {
	log := logr.Discard()
	if t, ok := corev1helpers.FindMatchingUntoleratedTaint(log, p.Taints, spec.Tolerations, doNotSchedule, false); ok {
		return "taint " + t.ToString() + " not tolerated"
	}
	terms := []corev1.NodeSelectorTerm{{}}
	if a := spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		terms = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	}
	pod := nodeaffinity.GetRequiredNodeAffinity(&corev1.Pod{Spec: *spec})
	why := "node affinity: no term matches"
	for _, t := range terms {
		exprs := slices.Clone(t.MatchExpressions)
		for _, k := range slices.Sorted(maps.Keys(spec.NodeSelector)) {
			exprs = append(exprs, in(k, spec.NodeSelector[k]))
		}
		labels, key := p.labelsFor(exprs)
		if key != "" {
			why = "label " + key + ": no value both the pod and the NodePool allow"
			continue
		}
		if ok, _ := pod.Match(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: labels}}); ok {
			return ""
		}
	}
	return why
}

// doNotSchedule selects the taints that keep a pod off a node (kube-scheduler's TaintToleration filter).
func doNotSchedule(t *corev1.Taint) bool {
	return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
}

func in(key, value string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{value}}
}

// labelsFor is a node's labels, key by key of exprs (a pod's), that both exprs and p's requirements allow; or the
// first key that has none.
func (p *Pool) labelsFor(exprs []corev1.NodeSelectorRequirement) (map[string]string, string) {
	byKey := map[string][]corev1.NodeSelectorRequirement{}
	for _, e := range exprs {
		byKey[e.Key] = append(byKey[e.Key], e)
	}
	labels := map[string]string{}
	for _, key := range slices.Sorted(maps.Keys(byKey)) {
		mine := p.requirements(key)
		var cands []*string // nil: the node has no such label
		cands = append(cands, nil)
		for _, e := range append(slices.Clone(byKey[key]), mine...) {
			for _, v := range e.Values {
				cands = append(cands, &v)
				if n, err := strconv.ParseInt(v, 10, 64); err == nil { // Gt and Lt
					for _, m := range []int64{n - 1, n + 1} {
						s := strconv.FormatInt(m, 10)
						cands = append(cands, &s)
					}
				}
			}
		}
		other := "jobsched-any-other-value"
		cands = append(cands, &other)
		found := false
		for _, c := range cands {
			if !matches(byKey[key], key, c) {
				continue
			}
			switch {
			case mine != nil && !matches(mine, key, c):
				continue
			case mine == nil && c != nil && !isWellKnown(key): // a label p does not define: its nodes lack it
				continue
			}
			if c != nil {
				labels[key] = *c
			}
			found = true
			break
		}
		if !found {
			return nil, key
		}
	}
	return labels, ""
}

// requirements are p's requirements on key: its template's label, and its requirements; nil when it names none.
func (p *Pool) requirements(key string) []corev1.NodeSelectorRequirement {
	var out []corev1.NodeSelectorRequirement
	if v, ok := p.Labels[key]; ok {
		out = append(out, in(key, v))
	}
	for _, r := range p.Requirements {
		if r.Key == key {
			out = append(out, r)
		}
	}
	return out
}

// matches says whether a node whose label key is value (nil: absent) meets exprs, by nodeaffinity's rules.
func matches(exprs []corev1.NodeSelectorRequirement, key string, value *string) bool {
	sel, err := nodeaffinity.NewNodeSelector(&corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: exprs}}})
	if err != nil {
		return false
	}
	node := &corev1.Node{}
	if value != nil {
		node.Labels = map[string]string{key: *value}
	}
	return sel.Match(node)
}
