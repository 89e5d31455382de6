package apply

import (
	"context"
	"errors"
	"fmt"

	"github.com/corralhq/corral/internal/plan"
)

// Creating beside the keeper. A new app on a node whose keeper this run
// creates used to wait for the keeper (an 11 s vzcreate) before its own
// container's create (another 11 s) began: a first apply took a keeper's
// create longer than the peer's (issue 30). So the app's container is
// created while the keeper is, and its volumes as soon as the keeper is
// there; the volumes are attached, as always, once both exist and while
// the container is stopped, and only then is it started.
//
// What a crash or failure can leave is what the one-after-the-other
// order could: the app's container created, stopped and without its
// volumes (as after a crash between create and attach), and the volumes
// created in the keeper or not yet (as after a crash between them and the
// create). The next apply attaches the volumes to that container and
// starts it. The volumes are still created by the keeper (it owns them)
// and checked by the attach guard before any attach. What changes is that
// a volume step that fails now leaves that stopped, empty container
// where it left none; it is the app's (tagged), and the next apply
// goes on with it.

// createBesideKeeper is applyChange's create of a new app while a keeper
// of its node is being created: the container's create runs beside the
// keeper's and the volumes' preparation.
func (e *Executor) createBesideKeeper(ctx context.Context, c plan.Change, keepers *keeperSet, obs *plan.Observed) error {
	var (
		vmid  int
		cerr  error
		built = make(chan struct{})
	)
	go func() {
		defer close(built)
		if pk := pendingIn(ctx)[c.Node]; pk != nil && pk.ended() && pk.err != nil {
			// The lock was held by that keeper's create (lockclaim.go):
			// with it failed, no app is created on the strength of it.
			cerr = fmt.Errorf("%s: create: %w", c.App, pk.err)
			return
		}
		vmid, cerr = e.createStep(ctx, c)
	}()
	vols, verr := e.prepareVolumes(ctx, c, keepers)
	if verr == nil {
		// The new container has no volume yet: none may be another
		// guest's (attach checks again right before each PUT).
		if err := e.ops().guardAttach(ctx, c.Node, 0, vols); err != nil {
			verr = fmt.Errorf("%s: %w", c.App, err)
		}
	}
	<-built
	if err := errors.Join(verr, cerr); err != nil {
		return err
	}
	if err := e.afterCreate(ctx, c, vmid, e.attachAndStart(ctx, c, vmid, vols, obs)); err != nil {
		return err
	}
	return e.applyHA(ctx, c, vmid, obs)
}
