package capacity

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"testing"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/jobsched/jobsched/pkg/follow"
)

// generatedPods is a pod collection of n pods spread over nodes nodes, made page by page as a LIST asks for them (a
// fresh decode each page, as the API server's answers are), so that nothing of it stays in memory but what the
// feed keeps. It cannot stream: its Watch fails, and the feed lists page by page.
type generatedPods struct{ n, nodes int }

func (g generatedPods) List(_ context.Context, o metav1.ListOptions) (*corev1.PodList, error) {
	from, _ := strconv.Atoi(o.Continue)
	l := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
	for i := from; i < g.n && i < from+int(o.Limit); i++ {
		p := kubePod("bench-fill-filler", fmt.Sprintf("filler-%06d-%05x", i, i*7919%0xfffff), fmt.Sprintf("bench-fill-node-%05d", i%g.nodes),
			corev1.PodRunning, rl("cpu", "100m", "memory", "128Mi"))
		p.UID = types.UID(uuid.NewSHA1(uuid.NameSpaceOID, []byte(p.Name)).String()) // an API server's are random UUIDs
		l.Items = append(l.Items, *p)
	}
	if next := from + int(o.Limit); next < g.n {
		l.Continue = strconv.Itoa(next)
	}
	return l, nil
}

func (generatedPods) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return nil, errors.New("no streaming list")
}

// BenchmarkFollowedPods measures what a fill run holds for every non-terminal pod of the cluster between its
// passes (Follow's pods feed: a heldPod per pod, by its UID), at the bench's largest size: 150,000 pods on
// 5,000 nodes. B/pod and MB-held are the live heap the feed keeps after a collection; a fill run's peak RSS is that
// plus the collector's headroom over it (GOGC: cmd/gogc.go) and the rest of the process
// (scripts/bench/results/fill-rss-5000.md).
func BenchmarkFollowedPods(b *testing.B) {
	const numNodes, numPods = 5000, 150000
	var held uint64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		f := &Follow{}
		pods := f.podsFeed(nil, generatedPods{numPods, numNodes}, &aggregator{namespace: "work", scheduler: "s"}, false)
		if err := pods.Sync(context.Background()); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		n := 0
		pods.Range(func(podKey, heldPod) { n++ })
		if n != numPods {
			b.Fatalf("the feed keeps %d pods, want %d", n, numPods)
		}
		held = after.HeapAlloc - before.HeapAlloc
	}
	b.ReportMetric(float64(held)/numPods, "B/pod")
	b.ReportMetric(float64(held)/1e6, "MB-held")
}

// generatedNodes is a node collection of n nodes of one group, made page by page as generatedPods.
type generatedNodes struct{ n int }

func (g generatedNodes) List(_ context.Context, o metav1.ListOptions) (*corev1.NodeList, error) {
	from, _ := strconv.Atoi(o.Continue)
	l := &corev1.NodeList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
	for i := from; i < g.n && i < from+int(o.Limit); i++ {
		n := kubeNode(fmt.Sprintf("bench-fill-node-%05d", i), corev1.ConditionTrue, rl("cpu", "32", "memory", "256Gi", "pods", "110", "ephemeral-storage", "100Gi"))
		n.Labels = map[string]string{"kubernetes.io/hostname": n.Name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
			"node.kubernetes.io/instance-type": "m5.8xlarge", "topology.kubernetes.io/zone": "zone-a", "type": "kwok"}
		l.Items = append(l.Items, *n)
	}
	if next := from + int(o.Limit); next < g.n {
		l.Continue = strconv.Itoa(next)
	}
	return l, nil
}

func (generatedNodes) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return nil, errors.New("no streaming list")
}

// BenchmarkFollowedNodes measures what a fill run holds for the nodes between its passes (Follow's nodes feed: a
// Node summary each), at the bench's largest size, 5,000 nodes of one group, as BenchmarkFollowedPods.
func BenchmarkFollowedNodes(b *testing.B) {
	const numNodes = 5000
	var held uint64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		f := &Follow{}
		nodes := f.nodesFeed(nil, generatedNodes{numNodes}, false)
		if err := nodes.Sync(context.Background()); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		if ns, _ := follow.Sorted(nodes); len(ns) != numNodes {
			b.Fatalf("the feed keeps %d nodes, want %d", len(ns), numNodes)
		}
		held = after.HeapAlloc - before.HeapAlloc
	}
	b.ReportMetric(float64(held)/numNodes, "B/node")
	b.ReportMetric(float64(held)/1e6, "MB-held")
}
