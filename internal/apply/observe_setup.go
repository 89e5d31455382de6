package apply

import (
	"context"
	"slices"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// ObserveSetup reads what ObserveOptions.DeferSetup left out of obs: the
// bridges of each online node and the templates of the storages that hold
// templates only (a storage that also holds volumes was listed whole).
// It is read after the guests, as Observe reads it: nothing in it
// depends on when the guests were listed.
func ObserveSetup(ctx context.Context, c *pve.Client, obs *plan.Observed) error {
	o := &observation{c: c, obs: obs}
	for _, node := range o.online() {
		if obs.SetupDeferred {
			for _, sid := range sortedKeys(obs.Storages[node]) {
				cts := obs.Storages[node][sid]
				if !slices.Contains(cts, "vztmpl") || slices.Contains(cts, "rootdir") || slices.Contains(cts, "images") {
					continue
				}
				if err := o.content(ctx, node, sid, "vztmpl"); err != nil {
					return err
				}
			}
		}
		if err := observeBridges(ctx, c, obs, node); err != nil {
			return err
		}
	}
	obs.SetupDeferred = false
	return nil
}
