package kube

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// PageSize bounds each LIST response: where a streaming list is not possible (see Each) a pass lists page by page and
// holds one page at a time.
const PageSize = 500

// Paginate calls page with opts (Limit PageSize) and then with each continue token page returns, until it returns "".
func Paginate(opts metav1.ListOptions, page func(metav1.ListOptions) (next string, err error)) error {
	opts.Limit = PageSize
	for {
		next, err := page(opts)
		if err != nil || next == "" {
			return err
		}
		opts.Continue = next
	}
}
