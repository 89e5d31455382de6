package apply

import (
	"context"
	"fmt"
	"strconv"

	"github.com/corralhq/corral/internal/plan"
)

// Power starts and stops an app's container outside an apply (corral
// start, stop, restart, and corral agent's restart of an unhealthy app).
// It holds only the runner: a power change needs the client, the
// observer and the stop request.
type Power struct {
	r *runner
}

// Power is the power side of e, over its runner.
func (e *Executor) Power() *Power {
	return &Power{r: e.ops()}
}

// Start starts an app's container (nothing to do when it runs).
func (p *Power) Start(ctx context.Context, app string, ct *plan.CT) error {
	return p.r.step(app, "start", "ct "+strconv.Itoa(ct.VMID), func() error { return p.r.start(ctx, app, ct.Node, ct.VMID) })
}

// Stop shuts an app's container down (gracefully, then hard after 60 s);
// nothing to do when it is stopped. The next apply starts it again.
func (p *Power) Stop(ctx context.Context, app string, ct *plan.CT) error {
	return p.r.ensureStopped(ctx, app, ct.Node, ct.VMID)
}

// Restart shuts an app's container down and starts it again (pending
// changes apply at the start, as with PVE's reboot).
func (p *Power) Restart(ctx context.Context, app string, ct *plan.CT) error {
	if err := p.Stop(ctx, app, ct); err != nil {
		return err
	}
	if err := p.Start(ctx, app, ct); err != nil {
		return fmt.Errorf("ct %d was stopped but did not start again: %w", ct.VMID, err)
	}
	return nil
}
