package autoscaler

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// caStatus is the part of the cluster-autoscaler's status (the YAML its recent releases write under the key status
// of ConfigMap kube-system/cluster-autoscaler-status) read here: each node group's sizes.
type caStatus struct {
	AutoscalerStatus string `json:"autoscalerStatus"`
	NodeGroups       []struct {
		Name   string `json:"name"`
		Health struct {
			CloudProviderTarget int `json:"cloudProviderTarget"`
			MinSize             int `json:"minSize"`
			MaxSize             int `json:"maxSize"`
			NodeCounts          struct {
				Registered struct {
					Total int `json:"total"`
					Ready int `json:"ready"`
				} `json:"registered"`
			} `json:"nodeCounts"`
		} `json:"health"`
	} `json:"nodeGroups"`
}

// maxStatus bounds the status read (a ConfigMap holds at most 1 MiB; a group's entry is a few hundred bytes).
const maxStatus = 1 << 20

// ParseStatus reads the node groups of the cluster-autoscaler's status: the YAML of recent releases (autoscalerStatus,
// clusterWide, nodeGroups[].name and .health.{cloudProviderTarget, minSize, maxSize, nodeCounts.registered}). The
// text of older releases ("Cluster-autoscaler status at ...") is refused, naming it.
func ParseStatus(data string) ([]Pool, error) {
	switch {
	case strings.TrimSpace(data) == "":
		return nil, errors.New("no status")
	case len(data) > maxStatus:
		return nil, fmt.Errorf("status of %d bytes, more than a ConfigMap holds", len(data))
	case strings.HasPrefix(strings.TrimSpace(data), "Cluster-autoscaler status"):
		return nil, errors.New("the text status of a cluster-autoscaler before 1.30 (want its YAML status): node groups unknown")
	}
	var st caStatus
	if err := yaml.Unmarshal([]byte(data), &st); err != nil {
		return nil, fmt.Errorf("status is not the cluster-autoscaler's YAML: %w", err)
	}
	if st.AutoscalerStatus == "" {
		return nil, errors.New("status has no autoscalerStatus: not the cluster-autoscaler's YAML status")
	}
	var pools []Pool
	for _, g := range st.NodeGroups {
		h := g.Health
		pools = append(pools, Pool{Kind: KindNodeGroup, Name: g.Name, Group: &Group{MinSize: h.MinSize, MaxSize: h.MaxSize,
			Target: h.CloudProviderTarget, Ready: h.NodeCounts.Registered.Ready, Registered: h.NodeCounts.Registered.Total}})
	}
	slices.SortFunc(pools, func(a, b Pool) int { return cmp.Compare(a.Name, b.Name) })
	return pools, nil
}
