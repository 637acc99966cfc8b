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
// feed keeps. It cannot stream (noStream): the feed lists page by page.
type generatedPods struct {
	noStream
	n, nodes int
}

func (g generatedPods) List(_ context.Context, o metav1.ListOptions) (*corev1.PodList, error) {
	from, to, next := page(o, g.n)
	l := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "1", Continue: next}}
	for i := from; i < to; i++ {
		p := kubePod("bench-fill-filler", fmt.Sprintf("filler-%06d-%05x", i, i*7919%0xfffff), fmt.Sprintf("bench-fill-node-%05d", i%g.nodes),
			corev1.PodRunning, rl("cpu", "100m", "memory", "128Mi"))
		p.UID = types.UID(uuid.NewSHA1(uuid.NameSpaceOID, []byte(p.Name)).String()) // an API server's are random UUIDs
		l.Items = append(l.Items, *p)
	}
	return l, nil
}

// generatedNodes is a node collection of n nodes of one group, made page by page as generatedPods.
type generatedNodes struct {
	noStream
	n int
}

func (g generatedNodes) List(_ context.Context, o metav1.ListOptions) (*corev1.NodeList, error) {
	from, to, next := page(o, g.n)
	l := &corev1.NodeList{ListMeta: metav1.ListMeta{ResourceVersion: "1", Continue: next}}
	for i := from; i < to; i++ {
		n := kubeNode(fmt.Sprintf("bench-fill-node-%05d", i), corev1.ConditionTrue, rl("cpu", "32", "memory", "256Gi", "pods", "110", "ephemeral-storage", "100Gi"))
		n.Labels = map[string]string{"kubernetes.io/hostname": n.Name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
			"node.kubernetes.io/instance-type": "m5.8xlarge", "topology.kubernetes.io/zone": "zone-a", "type": "kwok"}
		l.Items = append(l.Items, *n)
	}
	return l, nil
}

// page is the items [from, to) of n generated ones that the LIST o asks for, and the continue token of the rest.
func page(o metav1.ListOptions, n int) (from, to int, next string) {
	from, _ = strconv.Atoi(o.Continue)
	to = min(from+int(o.Limit), n)
	if to < n {
		next = strconv.Itoa(to)
	}
	return from, to, next
}

// noStream is a generated collection's Watch: it fails, so a feed lists it page by page.
type noStream struct{}

func (noStream) Watch(context.Context, metav1.ListOptions) (watch.Interface, error) {
	return nil, errors.New("no streaming list")
}

// liveHeap is what make's result holds of the live heap after a collection, and that result.
func liveHeap[T any](make func() T) (uint64, T) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	v := make()
	runtime.GC()
	runtime.ReadMemStats(&after)
	return after.HeapAlloc - before.HeapAlloc, v
}

// BenchmarkFollowedPods measures what a fill run holds for every non-terminal pod of the cluster between its
// passes (Follow's pods feed: a storedPod per pod, by its UID), at the bench's largest size: 150,000 pods on
// 5,000 nodes. B/pod and MB-held are the live heap the feed keeps after a collection; a fill run's peak RSS is that
// plus the collector's headroom over it (GOGC: cmd/gogc.go) and the rest of the process
// (scripts/bench/results/fill-rss-5000.md).
func BenchmarkFollowedPods(b *testing.B) {
	const numNodes, numPods = 5000, 150000
	var held uint64
	for b.Loop() {
		var pods *follow.Feed[corev1.Pod, *corev1.PodList, podKey, storedPod]
		held, pods = liveHeap(func() *follow.Feed[corev1.Pod, *corev1.PodList, podKey, storedPod] {
			pods := (&Follow{}).podsFeed(nil, generatedPods{n: numPods, nodes: numNodes}, &aggregator{namespace: "work", scheduler: "s"}, false)
			if err := pods.Sync(context.Background()); err != nil {
				b.Fatal(err)
			}
			return pods
		})
		n := 0
		pods.Range(func(podKey, storedPod) { n++ }, nil)
		if n != numPods {
			b.Fatalf("the feed keeps %d pods, want %d", n, numPods)
		}
	}
	b.ReportMetric(float64(held)/numPods, "B/pod")
	b.ReportMetric(float64(held)/1e6, "MB-held")
}

// BenchmarkFollowedNodes measures what a fill run holds for the nodes between its passes (Follow's nodes feed: a
// Node summary each), at the bench's largest size, 5,000 nodes of one group, as BenchmarkFollowedPods.
func BenchmarkFollowedNodes(b *testing.B) {
	const numNodes = 5000
	var held uint64
	for b.Loop() {
		var nodes *follow.Feed[corev1.Node, *corev1.NodeList, string, Node]
		held, nodes = liveHeap(func() *follow.Feed[corev1.Node, *corev1.NodeList, string, Node] {
			nodes := (&Follow{}).nodesFeed(nil, generatedNodes{n: numNodes}, false)
			if err := nodes.Sync(context.Background()); err != nil {
				b.Fatal(err)
			}
			return nodes
		})
		if ns, _ := follow.Sorted(nodes); len(ns) != numNodes {
			b.Fatalf("the feed keeps %d nodes, want %d", len(ns), numNodes)
		}
	}
	b.ReportMetric(float64(held)/numNodes, "B/node")
	b.ReportMetric(float64(held)/1e6, "MB-held")
}
