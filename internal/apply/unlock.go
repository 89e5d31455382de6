package apply

import (
	"context"
	"fmt"
	"slices"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// Unlocked is what Unlock did on one node: the lease it broke, nil when
// the node was not locked.
type Unlocked struct {
	Node   string      `json:"node"`
	Broken *plan.Lease `json:"broken"`
}

// Unlock breaks corral's lock on nodes, or on every locked node when
// none is named (`corral unlock`), with BreakLease's rules: a lease that
// ran out or whose holder is a gone process of this machine, or any with
// force. On an error it returns what it did before it.
func Unlock(ctx context.Context, c *pve.Client, nodes []string, force bool) ([]Unlocked, error) {
	obs, err := Observe(ctx, c)
	if err != nil {
		return nil, err
	}
	if len(nodes) == 0 {
		for _, n := range obs.Nodes {
			if ks := obs.Keepers[n]; len(ks) > 0 && ks[0].Lease != nil {
				nodes = append(nodes, n)
			}
		}
	}
	ex := &Executor{Client: c}
	out := []Unlocked{}
	for _, n := range nodes {
		if !slices.Contains(obs.Nodes, n) {
			return out, fmt.Errorf("node %q does not exist (nodes: %v)", n, obs.Nodes)
		}
		l, err := ex.BreakLease(ctx, obs, n, force)
		if err != nil {
			return out, err
		}
		out = append(out, Unlocked{n, l})
	}
	return out, nil
}
