package apply

import (
	"context"
	"fmt"
	"strconv"

	"github.com/corralhq/corral/internal/plan"
)

// StartApp starts an app's container (nothing to do when it runs).
func (e *Executor) StartApp(ctx context.Context, app string, ct *plan.CT) error {
	r := e.ops()
	return r.step(app, "start", "ct "+strconv.Itoa(ct.VMID), func() error { return r.start(ctx, app, ct.Node, ct.VMID) })
}

// StopApp shuts an app's container down (gracefully, then hard after 60 s);
// nothing to do when it is stopped. The next apply starts it again.
func (e *Executor) StopApp(ctx context.Context, app string, ct *plan.CT) error {
	return e.ops().ensureStopped(ctx, app, ct.Node, ct.VMID)
}

// RestartApp shuts an app's container down and starts it again (pending
// changes apply at the start, as with PVE's reboot).
func (e *Executor) RestartApp(ctx context.Context, app string, ct *plan.CT) error {
	if err := e.StopApp(ctx, app, ct); err != nil {
		return err
	}
	if err := e.StartApp(ctx, app, ct); err != nil {
		return fmt.Errorf("ct %d was stopped but did not start again: %w", ct.VMID, err)
	}
	return nil
}
