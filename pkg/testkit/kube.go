package testkit

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	batchv1client "k8s.io/client-go/kubernetes/typed/batch/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	nodev1client "k8s.io/client-go/kubernetes/typed/node/v1"
	"k8s.io/client-go/util/watchlist"

	"github.com/jobsched/jobsched/pkg/kube"
)

// Fake is client-go's fake clientset as jobsched's client (kube.Interface), for the unit tests: its typed clients
// are client-go's fake ones, and everything else of the fake (Actions, reactors, the tracker, the full clientset
// through Clientset) is there as it is.
type Fake struct{ *fake.Clientset }

// NewFake is a Fake holding objects.
func NewFake(objects ...runtime.Object) *Fake { return &Fake{fake.NewClientset(objects...)} }

func (f *Fake) BatchV1() kube.BatchV1               { return Kube(f.Clientset).BatchV1() }
func (f *Fake) CoreV1() kube.CoreV1                 { return Kube(f.Clientset).CoreV1() }
func (f *Fake) CoordinationV1() kube.CoordinationV1 { return Kube(f.Clientset).CoordinationV1() }
func (f *Fake) EventsV1() kube.EventsV1             { return Kube(f.Clientset).EventsV1() }
func (f *Fake) NodeV1() kube.NodeV1                 { return Kube(f.Clientset).NodeV1() }

// Kube is a client-go clientset as kube.Interface: each resource is the clientset's typed client.
func Kube(c kubernetes.Interface) kube.Interface { return clientset{c} }

type clientset struct{ c kubernetes.Interface }

func (c clientset) BatchV1() kube.BatchV1               { return batchV1{c.c.BatchV1()} }
func (c clientset) CoreV1() kube.CoreV1                 { return coreV1{c.c.CoreV1()} }
func (c clientset) CoordinationV1() kube.CoordinationV1 { return coordinationV1{c.c.CoordinationV1()} }
func (c clientset) EventsV1() kube.EventsV1             { return eventsV1{c.c.EventsV1()} }
func (c clientset) NodeV1() kube.NodeV1                 { return nodeV1{c.c.NodeV1()} }

// IsWatchListSemanticsUnSupported passes on what the clientset says of streaming lists (a fake one cannot: kube.Each
// then lists page by page).
func (c clientset) IsWatchListSemanticsUnSupported() bool {
	return watchlist.DoesClientNotSupportWatchListSemantics(c.c)
}

type batchV1 struct{ batchv1client.BatchV1Interface }

func (g batchV1) Jobs(ns string) kube.Jobs { return g.BatchV1Interface.Jobs(ns) }

type coreV1 struct{ corev1client.CoreV1Interface }

func (g coreV1) Pods(ns string) kube.Pods         { return g.CoreV1Interface.Pods(ns) }
func (g coreV1) Nodes() kube.Nodes                { return g.CoreV1Interface.Nodes() }
func (g coreV1) Events(ns string) kube.CoreEvents { return g.CoreV1Interface.Events(ns) }
func (g coreV1) ResourceQuotas(ns string) kube.ResourceQuotas {
	return g.CoreV1Interface.ResourceQuotas(ns)
}
func (g coreV1) LimitRanges(ns string) kube.LimitRanges { return g.CoreV1Interface.LimitRanges(ns) }
func (g coreV1) ConfigMaps(ns string) kube.ConfigMaps   { return g.CoreV1Interface.ConfigMaps(ns) }

type coordinationV1 struct {
	coordinationv1client.CoordinationV1Interface
}

func (g coordinationV1) Leases(ns string) kube.Leases { return g.CoordinationV1Interface.Leases(ns) }

type eventsV1 struct {
	eventsv1client.EventsV1Interface
}

func (g eventsV1) Events(ns string) kube.Events { return g.EventsV1Interface.Events(ns) }

type nodeV1 struct{ nodev1client.NodeV1Interface }

func (g nodeV1) RuntimeClasses() kube.RuntimeClasses { return g.NodeV1Interface.RuntimeClasses() }
