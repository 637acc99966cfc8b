package kube

import (
	"context"
	"errors"
	"net/http"

	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/gentype"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// Interface is the part of client-go's clientset (k8s.io/client-go/kubernetes.Interface) that jobsched uses: the
// same groups, resources and methods (less Apply), so that client-go's typed clients, its fake ones too, satisfy each
// resource's interface as they are (the tests wrap client-go's fake clientset in one: testkit.Fake).
//
// Why not client-go's clientset: importing it (or client-go's tools/events, tools/leaderelection, discovery, which
// import it) links the typed clients of every API group and registers all of them in client-go's scheme when the
// process starts, before any work: megabytes of every run's resident memory, for groups jobsched never calls.
// Here each resource is client-go's own generic typed client (k8s.io/client-go/gentype, what the clientset's
// generated clients are made of) over a scheme of the five groups below; see scripts/bench/README.md, Memory. The
// price is this file: a resource jobsched starts to use is one method here (and in testkit.Fake). A test pins that
// the binary links none of client-go's clientset (TestNoClientset).
type Interface interface {
	BatchV1() BatchV1
	CoreV1() CoreV1
	CoordinationV1() CoordinationV1
	EventsV1() EventsV1
	NodeV1() NodeV1
}

// BatchV1 is batch/v1.
type BatchV1 interface {
	RESTClient() rest.Interface
	Jobs(namespace string) Jobs
}

// CoreV1 is the core group, v1.
type CoreV1 interface {
	RESTClient() rest.Interface
	Pods(namespace string) Pods
	Nodes() Nodes
	Events(namespace string) CoreEvents
	ResourceQuotas(namespace string) ResourceQuotas
	LimitRanges(namespace string) LimitRanges
	ConfigMaps(namespace string) ConfigMaps
}

// CoordinationV1 is coordination.k8s.io/v1.
type CoordinationV1 interface {
	RESTClient() rest.Interface
	Leases(namespace string) Leases
}

// EventsV1 is events.k8s.io/v1.
type EventsV1 interface {
	RESTClient() rest.Interface
	Events(namespace string) Events
}

// NodeV1 is node.k8s.io/v1.
type NodeV1 interface {
	RESTClient() rest.Interface
	RuntimeClasses() RuntimeClasses
}

// Resource is the typed client of one resource of objects T and lists L: the methods client-go's typed clients
// share, less Apply (its apply configurations would link client-go's discovery, and with it the clientset's scheme).
type Resource[T, L any] interface {
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
}

// The resources jobsched reads or writes.
type (
	Jobs           = Resource[*batchv1.Job, *batchv1.JobList]
	Pods           = Resource[*corev1.Pod, *corev1.PodList]
	Nodes          = Resource[*corev1.Node, *corev1.NodeList]
	CoreEvents     = Resource[*corev1.Event, *corev1.EventList]
	ResourceQuotas = Resource[*corev1.ResourceQuota, *corev1.ResourceQuotaList]
	LimitRanges    = Resource[*corev1.LimitRange, *corev1.LimitRangeList]
	ConfigMaps     = Resource[*corev1.ConfigMap, *corev1.ConfigMapList]
	Leases         = Resource[*coordinationv1.Lease, *coordinationv1.LeaseList]
	Events         = Resource[*eventsv1.Event, *eventsv1.EventList]
	RuntimeClasses = Resource[*nodev1.RuntimeClass, *nodev1.RuntimeClassList]
)

// scheme holds the types of the groups of Interface (and meta/v1's options), and nothing else: what the clients
// encode and decode. It is built once per client (NewClient), not when the process starts.
func scheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	for _, add := range []func(*runtime.Scheme) error{batchv1.AddToScheme, corev1.AddToScheme, coordinationv1.AddToScheme,
		eventsv1.AddToScheme, nodev1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// NewForConfig builds Interface on cfg, as client-go's kubernetes.NewForConfig builds its clientset: one HTTP client
// (one transport) and one client-side rate limiter (when cfg.QPS > 0) shared by every group.
func NewForConfig(cfg *rest.Config) (Interface, error) {
	s, err := scheme()
	if err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	if cfg.RateLimiter == nil && cfg.QPS > 0 {
		if cfg.Burst <= 0 {
			return nil, errors.New("a burst greater than 0 is needed with a QPS")
		}
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	h, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	c := &clientset{params: runtime.NewParameterCodec(s)}
	codecs := rest.CodecFactoryForGeneratedClient(s, serializer.NewCodecFactory(s)).WithoutConversion()
	for _, g := range []struct {
		into *rest.Interface
		path string
		gv   schema.GroupVersion
	}{
		{&c.batch, "/apis", batchv1.SchemeGroupVersion},
		{&c.core, "/api", corev1.SchemeGroupVersion},
		{&c.coordination, "/apis", coordinationv1.SchemeGroupVersion},
		{&c.events, "/apis", eventsv1.SchemeGroupVersion},
		{&c.node, "/apis", nodev1.SchemeGroupVersion},
	} {
		if *g.into, err = groupClient(cfg, h, g.path, g.gv, codecs); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// groupClient is the REST client of one group version, configured as client-go's generated clients configure theirs.
func groupClient(cfg *rest.Config, h *http.Client, path string, gv schema.GroupVersion, codecs runtime.NegotiatedSerializer) (rest.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion, cfg.APIPath, cfg.NegotiatedSerializer = &gv, path, codecs
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	return rest.RESTClientForConfigAndClient(cfg, h)
}

// clientset is Interface on the API server.
type clientset struct {
	params                                  runtime.ParameterCodec
	batch, core, coordination, events, node rest.Interface
}

// group is one group version's REST client and the parameter codec of its resources.
type group struct {
	c      rest.Interface
	params runtime.ParameterCodec
}

func (g group) RESTClient() rest.Interface { return g.c }

type (
	batchGroup        struct{ group }
	coreGroup         struct{ group }
	coordinationGroup struct{ group }
	eventsGroup       struct{ group }
	nodeGroup         struct{ group }
)

func (c *clientset) BatchV1() BatchV1 { return batchGroup{group{c.batch, c.params}} }
func (c *clientset) CoreV1() CoreV1   { return coreGroup{group{c.core, c.params}} }
func (c *clientset) CoordinationV1() CoordinationV1 {
	return coordinationGroup{group{c.coordination, c.params}}
}
func (c *clientset) EventsV1() EventsV1 { return eventsGroup{group{c.events, c.params}} }
func (c *clientset) NodeV1() NodeV1     { return nodeGroup{group{c.node, c.params}} }

// resource is the typed client of resource name in namespace ("" for a cluster-scoped one), asking for protobuf as
// client-go's generated clients do.
func resource[T interface {
	runtime.Object
	metav1.Object
}, L runtime.Object](g group, name, namespace string, newObject func() T, newList func() L) Resource[T, L] {
	return gentype.NewClientWithList(name, g.c, g.params, namespace, newObject, newList, gentype.PrefersProtobuf[T]())
}

func (g batchGroup) Jobs(ns string) Jobs {
	return resource(g.group, "jobs", ns, func() *batchv1.Job { return &batchv1.Job{} }, func() *batchv1.JobList { return &batchv1.JobList{} })
}

func (g coreGroup) Pods(ns string) Pods {
	return resource(g.group, "pods", ns, func() *corev1.Pod { return &corev1.Pod{} }, func() *corev1.PodList { return &corev1.PodList{} })
}

func (g coreGroup) Nodes() Nodes {
	return resource(g.group, "nodes", "", func() *corev1.Node { return &corev1.Node{} }, func() *corev1.NodeList { return &corev1.NodeList{} })
}

func (g coreGroup) Events(ns string) CoreEvents {
	return resource(g.group, "events", ns, func() *corev1.Event { return &corev1.Event{} }, func() *corev1.EventList { return &corev1.EventList{} })
}

func (g coreGroup) ResourceQuotas(ns string) ResourceQuotas {
	return resource(g.group, "resourcequotas", ns, func() *corev1.ResourceQuota { return &corev1.ResourceQuota{} },
		func() *corev1.ResourceQuotaList { return &corev1.ResourceQuotaList{} })
}

func (g coreGroup) LimitRanges(ns string) LimitRanges {
	return resource(g.group, "limitranges", ns, func() *corev1.LimitRange { return &corev1.LimitRange{} },
		func() *corev1.LimitRangeList { return &corev1.LimitRangeList{} })
}

func (g coreGroup) ConfigMaps(ns string) ConfigMaps {
	return resource(g.group, "configmaps", ns, func() *corev1.ConfigMap { return &corev1.ConfigMap{} },
		func() *corev1.ConfigMapList { return &corev1.ConfigMapList{} })
}

func (g coordinationGroup) Leases(ns string) Leases {
	return resource(g.group, "leases", ns, func() *coordinationv1.Lease { return &coordinationv1.Lease{} },
		func() *coordinationv1.LeaseList { return &coordinationv1.LeaseList{} })
}

func (g eventsGroup) Events(ns string) Events {
	return resource(g.group, "events", ns, func() *eventsv1.Event { return &eventsv1.Event{} }, func() *eventsv1.EventList { return &eventsv1.EventList{} })
}

func (g nodeGroup) RuntimeClasses() RuntimeClasses {
	return resource(g.group, "runtimeclasses", "", func() *nodev1.RuntimeClass { return &nodev1.RuntimeClass{} },
		func() *nodev1.RuntimeClassList { return &nodev1.RuntimeClassList{} })
}
