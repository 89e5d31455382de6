package apply

import (
	"context"
	"fmt"

	"github.com/corralhq/corral/internal/plan"
)

// Snapshots takes, rolls back and removes an app container's snapshots
// (corral snapshot, rollback, snapshot --delete), checks a rollback
// against the volumes it would bring back (snaprefs.go), and protects an
// in-place change with one (protect.go). It holds only the runner: a
// snapshot needs the client, the observer and the stop request, nothing
// else of the Executor.
type Snapshots struct {
	r *runner
}

// Snapshots is the snapshot side of e, over its runner.
func (e *Executor) Snapshots() *Snapshots {
	return &Snapshots{r: e.ops()}
}

// Take takes snapshot name of ct (running or not) and waits for it. It
// covers every volume ct references, keeper volumes attached as mpN
// included.
func (sn *Snapshots) Take(ctx context.Context, ct *plan.CT, name string) error {
	app := ctApp(ct)
	return sn.r.step(app, "snapshot", fmt.Sprintf("%s of ct %d", name, ct.VMID), func() error {
		upid, err := sn.r.client.CreateSnapshot(ctx, ct.Node, ct.VMID, name, "corral snapshot of app "+app)
		if err == nil {
			err = sn.r.wait(ctx, app, upid)
		}
		return explainSnapErr(err, ct.VMID, "VM.Snapshot")
	})
}

// Rollback rolls ct back to snapshot name, which brings back the config
// and every volume the snapshot covers. PVE stops a running container
// for it; Rollback starts it again when ct was running.
func (sn *Snapshots) Rollback(ctx context.Context, ct *plan.CT, name string) error {
	return sn.RollbackStart(ctx, ct, name, ct.Status == "running")
}

// RollbackStart is Rollback with the start afterwards decided by start.
func (sn *Snapshots) RollbackStart(ctx context.Context, ct *plan.CT, name string, start bool) error {
	app := ctApp(ct)
	return sn.r.step(app, "rollback", fmt.Sprintf("ct %d to %s", ct.VMID, name), func() error {
		upid, err := sn.r.client.RollbackSnapshot(ctx, ct.Node, ct.VMID, name, start)
		if err == nil {
			err = sn.r.wait(ctx, app, upid)
		}
		return explainSnapErr(err, ct.VMID, "VM.Snapshot.Rollback")
	})
}

// Delete removes snapshot name of ct.
func (sn *Snapshots) Delete(ctx context.Context, ct *plan.CT, name string) error {
	app := ctApp(ct)
	return sn.r.step(app, "snapshot", fmt.Sprintf("remove %s of ct %d", name, ct.VMID), func() error {
		upid, err := sn.r.client.DeleteSnapshot(ctx, ct.Node, ct.VMID, name, false)
		if err == nil {
			err = sn.r.wait(ctx, app, upid)
		}
		return explainSnapErr(err, ct.VMID, "VM.Snapshot")
	})
}
