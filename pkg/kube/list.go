package kube

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/pager"
)

// PageSize bounds each LIST response: where a streaming list is not possible (see Each) a pass lists page by page and
// holds one page at a time (and the next one, which client-go's pager reads ahead).
const PageSize = 500

// List calls fn with every object opts selects, page by page (PageSize a page), through client-go's pager; list is a
// typed client's List. The first page's resourceVersion is returned: every later page is served from the same
// snapshot.
func List[T any, L any](ctx context.Context, list func(context.Context, metav1.ListOptions) (L, error), opts metav1.ListOptions, fn func(*T)) (string, error) {
	rv := ""
	p := pager.New(func(_ context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		l, err := list(ctx, opts)
		if err != nil {
			return nil, err
		}
		obj, ok := any(l).(runtime.Object)
		if !ok {
			return nil, fmt.Errorf("a %T is not a list", l)
		}
		if m, ok := obj.(metav1.ListInterface); ok && rv == "" {
			rv = m.GetResourceVersion()
		}
		return obj, nil
	})
	p.PageSize, p.PageBufferSize = PageSize, 0
	// The pager gets a context that is never done: each page's LIST gets ctx and fails on its own when ctx is done, as
	// it did before the pager (a pass whose deadline has passed still reports what its LISTs said).
	err := p.EachListItem(context.WithoutCancel(ctx), opts, func(obj runtime.Object) error {
		o, ok := any(obj).(*T)
		if !ok {
			return fmt.Errorf("the list held a %T", obj)
		}
		fn(o)
		return nil
	})
	return rv, err
}
