package capacity

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// limitRange is a LimitRange with one Container item.
func limitRange(name string, defaultRequest, def corev1.ResourceList) corev1.LimitRange {
	return corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
		{Type: corev1.LimitTypePod, Max: rl("cpu", "64")}, // not a container default: ignored
		{Type: corev1.LimitTypeContainer, DefaultRequest: defaultRequest, Default: def},
	}}}
}

func runtimeClass(overhead corev1.ResourceList) *nodev1.RuntimeClass {
	return &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "kata"}, Handler: "kata", Overhead: &nodev1.Overhead{PodFixed: overhead}}
}

// TestAdmittedRuntimeClassScheduling: a RuntimeClass's nodeSelector and tolerations are merged into the template,
// which changes the nodes it may use; the template itself is not changed.
func TestAdmittedRuntimeClassScheduling(t *testing.T) {
	spec := corev1.PodSpec{NodeSelector: map[string]string{"zone": "a"}, Containers: []corev1.Container{ctr(nil, nil)}}
	rc := runtimeClass(nil)
	rc.Overhead = nil
	rc.Scheduling = &nodev1.Scheduling{NodeSelector: map[string]string{"runtime": "kata"},
		Tolerations: []corev1.Toleration{{Key: "kata", Operator: corev1.TolerationOpExists}}}
	got := Admitted(&spec, nil, rc).Spec
	if want := map[string]string{"zone": "a", "runtime": "kata"}; !equality.Semantic.DeepEqual(got.NodeSelector, want) {
		t.Errorf("nodeSelector = %v, want %v", got.NodeSelector, want)
	}
	if len(got.Tolerations) != 1 || got.Tolerations[0].Key != "kata" {
		t.Errorf("tolerations = %v, want the RuntimeClass's", got.Tolerations)
	}
	if len(spec.NodeSelector) != 1 || spec.Containers[0].Resources.Requests != nil {
		t.Errorf("Admitted changed the template: %+v", spec)
	}
}
