package capacity

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestQuotaApplies: which scoped ResourceQuotas charge a template's pods, scope by scope.
func TestQuotaApplies(t *testing.T) {
	scoped := func(scopes ...corev1.ResourceQuotaScope) *corev1.ResourceQuota {
		return &corev1.ResourceQuota{Spec: corev1.ResourceQuotaSpec{Scopes: scopes}}
	}
	deadline := func(s int64) func(*corev1.PodSpec) {
		return func(p *corev1.PodSpec) { p.ActiveDeadlineSeconds = &s }
	}
	noRequests := func(p *corev1.PodSpec) { p.Containers[0].Resources = corev1.ResourceRequirements{} }
	memoryOnly := func(p *corev1.PodSpec) { p.Containers[0].Resources.Requests = rl("memory", "1Gi") }
	tests := []struct {
		name  string
		spec  *corev1.PodSpec
		quota *corev1.ResourceQuota
		want  bool
	}{
		{name: "no scope", spec: spec(), quota: scoped(), want: true},
		{name: "Terminating: activeDeadlineSeconds 0 counts", spec: spec(deadline(0)), quota: scoped(corev1.ResourceQuotaScopeTerminating), want: true},
		{name: "Terminating: no deadline", spec: spec(), quota: scoped(corev1.ResourceQuotaScopeTerminating), want: false},
		{name: "NotTerminating: no deadline", spec: spec(), quota: scoped(corev1.ResourceQuotaScopeNotTerminating), want: true},
		{name: "NotTerminating: a deadline", spec: spec(deadline(60)), quota: scoped(corev1.ResourceQuotaScopeNotTerminating), want: false},
		{name: "BestEffort: no requests or limits", spec: spec(noRequests), quota: scoped(corev1.ResourceQuotaScopeBestEffort), want: true},
		{name: "BestEffort: a memory request only", spec: spec(memoryOnly), quota: scoped(corev1.ResourceQuotaScopeBestEffort), want: false},
		{name: "NotBestEffort: a memory request only", spec: spec(memoryOnly), quota: scoped(corev1.ResourceQuotaScopeNotBestEffort), want: true},
		{name: "scopes ANDed", spec: spec(deadline(60)), quota: scoped(corev1.ResourceQuotaScopeTerminating, corev1.ResourceQuotaScopeBestEffort), want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := quotaApplies(tt.spec, tt.quota); got != tt.want {
				t.Errorf("quotaApplies() = %v, want %v", got, tt.want)
			}
		})
	}
}
