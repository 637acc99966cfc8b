// Package kube is jobsched's access to the API server: its clients (Interface, the part of client-go's clientset
// that jobsched uses, built without it: see Interface), the paged or streamed lists read with them.
package kube

import (
	"context"
	"fmt"

	"github.com/rs/zerolog"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/jobsched/jobsched/pkg/version"
)

// Options say how to reach the cluster.
type Options struct {
	Kubeconfig string  // --kubeconfig
	Context    string  // --context
	QPS        float32 // a client-side cap; 0: none
	Burst      int
}

// NewClient returns a client and the namespace of its context. Inside a pod (and with neither --kubeconfig nor
// --context given) it uses the pod's service account; otherwise --kubeconfig, else $KUBECONFIG, else ~/.kube/config.
// Lists are asked for as protobuf, which is smaller and cheaper to decode than JSON.
func NewClient(o Options) (Interface, string, error) {
	cfg, namespace, err := restConfig(o)
	if err != nil {
		return nil, "", err
	}
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	c, err := NewForConfig(cfg)
	if err != nil {
		return nil, "", fmt.Errorf("building the Kubernetes client: %w", err)
	}
	return c, namespace, nil
}

// NewDynamic returns a client for objects jobsched has no Go types for (Kueue's), found the way NewClient finds
// the cluster. Custom resources are served as JSON only.
func NewDynamic(o Options) (dynamic.Interface, error) {
	cfg, _, err := restConfig(o)
	if err != nil {
		return nil, err
	}
	c, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the dynamic Kubernetes client: %w", err)
	}
	return c, nil
}

// restConfig is the client configuration and the namespace of its context.
func restConfig(o Options) (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.Kubeconfig
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.Context})

	var cfg *rest.Config
	if o.Kubeconfig == "" && o.Context == "" {
		cfg, _ = rest.InClusterConfig() // not in a pod (no service account files): the kubeconfig below
	}
	if cfg == nil {
		var err error
		if cfg, err = loader.ClientConfig(); err != nil {
			return nil, "", fmt.Errorf("loading kubeconfig: %w", err)
		}
	}
	namespace, _, err := loader.Namespace()
	if err != nil || namespace == "" {
		namespace = "default"
	}
	// No client-side limiter unless asked for: modern API servers protect themselves with Priority and Fairness and
	// answer 429 with Retry-After, which client-go honours (up to 10 retries); a pass bounds its own concurrency.
	cfg.QPS, cfg.Burst = o.QPS, o.Burst
	if o.QPS <= 0 {
		cfg.QPS = -1 // client-go: a negative QPS means no rate limiter (0 would mean its default of 5)
	}
	cfg.UserAgent = "jobsched/" + version.Get().Version
	cfg.WarningHandlerWithContext = WarningLog{}
	return cfg, namespace, nil
}

// WarningLog logs the API server's warnings (a Warning header with code 299: a deprecated field in a Job template)
// with the logger of the request's context, at warn: in the run's format with its fields. client-go's default
// handler writes them with klog, as text among JSON lines when the context carries no logr.
type WarningLog struct{}

// HandleWarningHeaderWithContext implements rest.WarningHandlerWithContext.
func (WarningLog) HandleWarningHeaderWithContext(ctx context.Context, code int, _ string, message string) {
	if code != 299 || message == "" {
		return
	}
	zerolog.Ctx(ctx).Warn().Str("warning", message).Msg("the API server warns")
}
