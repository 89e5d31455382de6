package apply

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/wait"
)

// ObserveAddresses reads, for each of apps (the apps whose facts a
// manifest's guest strings name, ${app:APP.FACT}), the address its
// running container reports when its config sets none (DHCP), into
// CT.Address: the planner reads a guest's facts from obs, and it does no
// I/O. Other containers are not asked, which would cost a request each.
func ObserveAddresses(ctx context.Context, c *pve.Client, obs *plan.Observed, apps []string) error {
	for _, app := range apps {
		cts := obs.Apps[app]
		if len(cts) != 1 || cts[0].Status != "running" {
			continue
		}
		addr, err := Address(ctx, c, cts[0])
		if err != nil {
			return fmt.Errorf("app %s: %w", app, err)
		}
		cts[0].Address = addr
	}
	return nil
}

// placement is where an app's container is once its change is done.
type placement struct {
	node string
	vmid int
}

// placed records where app's container is now that its change is done,
// for the apps whose guest work reads its facts.
func (r *runner) placed(app, node string, vmid int) {
	r.places.Store(app, placement{node: node, vmid: vmid})
}

// whereIs is where app's container is: as this run's change of it left
// it, else as observed before the run.
func (r *runner) whereIs(app string) (placement, bool) {
	if p, ok := r.places.Load(app); ok {
		return p.(placement), true
	}
	if r.observed != nil {
		if cts := r.observed.Apps[app]; len(cts) == 1 {
			return placement{node: cts[0].Node, vmid: cts[0].VMID}, true
		}
	}
	return placement{}, false
}

// addressWait bounds how long apply waits for a started container to
// report the address its DHCP lease gave it.
const addressWait = 30 * time.Second

// liveFact reads app's fact from the cluster now, for a guest work that
// names it: the app's change in this run is done (Change.After).
func (r *runner) liveFact(ctx context.Context, app, fact string) (string, error) {
	p, ok := r.whereIs(app)
	if !ok {
		return "", fmt.Errorf("app %s has no container (its change failed or was left out); apply it first: corral apply %s", app, app)
	}
	switch fact {
	case "vmid":
		return strconv.Itoa(p.vmid), nil
	case "node":
		return p.node, nil
	}
	deadline := time.Now().Add(addressWait)
	for {
		conf, err := containerConfig(ctx, r.client, p.node, p.vmid)
		if err != nil {
			return "", fmt.Errorf("read app %s's address: %w", app, err)
		}
		addr, err := Address(ctx, r.client, &plan.CT{Node: p.node, VMID: p.vmid, Config: conf, Status: "running"})
		if err != nil || addr != "" {
			return addr, err
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("app %s's container %d reports no IPv4 address on eth0 after %s (no DHCP lease?); give it a static network.ip, or check its network", app, p.vmid, addressWait)
		}
		if err := wait.Sleep(ctx, time.Second); err != nil {
			return "", err
		}
	}
}

// FactChangedError says a fact a guest work reads is not what the plan
// read: the plan is stale for that app.
type FactChangedError struct {
	App, Ref, Planned, Now string
}

func (e *FactChangedError) Error() string {
	return fmt.Sprintf("%s: ${app:%s} was %s when the plan was made and is %s now; %s's provisioning did not run: run corral plan (and apply) again",
		e.App, e.Ref, e.Planned, e.Now, e.App)
}

// withFacts is c's guest work with the facts it names read now, and c
// with the digest and steps of that work (the plan's may say "known
// after apply"). A fact the plan knew must still hold: else the work is
// not what the plan showed, and it does not run.
func (g *guests) withFacts(ctx context.Context, c plan.Change, work GuestWork) (plan.Change, GuestWork, error) {
	refs := work.FactRefs()
	if len(refs) == 0 {
		return c, work, nil
	}
	now := map[string]string{}
	for _, ref := range refs {
		app, fact, _ := strings.Cut(ref, ".")
		v, err := g.liveFact(ctx, app, fact)
		if err != nil {
			return c, work, fmt.Errorf("%s: read ${app:%s}: %w", c.App, ref, err)
		}
		if c.Desired != nil {
			if was, ok := c.Desired.Facts[ref]; ok && was != v {
				return c, work, &FactChangedError{App: c.App, Ref: ref, Planned: was, Now: v}
			}
		}
		now[ref] = v
	}
	work, unknown := work.WithFacts(func(app, fact string) (string, bool) {
		v, ok := now[app+"."+fact]
		return v, ok
	})
	if len(unknown) > 0 { // every fact was read above
		return c, work, fmt.Errorf("%s: facts %s could not be read", c.App, strings.Join(unknown, ", "))
	}
	if c.Desired != nil {
		d := *c.Desired
		d.GuestDigest, d.Steps = work.Digest(), plan.StepsOf(work)
		d.Facts, d.FactsUnknown = now, nil
		c.Desired = &d
	}
	return c, work, nil
}

// factOrdered is changes with each change after those of the apps its
// guest work reads (Change.After), the order kept otherwise: forEachApp
// then starts a change only after the ones it waits for started.
func factOrdered(changes []plan.Change) []plan.Change {
	index := map[string]int{}
	for i, c := range changes {
		index[c.App] = i
	}
	seen := make([]bool, len(changes))
	out := make([]plan.Change, 0, len(changes))
	var visit func(int)
	visit = func(i int) {
		if seen[i] {
			return
		}
		seen[i] = true
		for _, a := range changes[i].After {
			if j, ok := index[a]; ok {
				visit(j)
			}
		}
		out = append(out, changes[i])
	}
	for i := range changes {
		visit(i)
	}
	return out
}

// afterDeps waits until the changes c waits for (Change.After) among
// done's are finished; an error names the first that failed.
func afterDeps(ctx context.Context, c plan.Change, done map[string]*appDone) error {
	for _, a := range c.After {
		d := done[a]
		if d == nil || a == c.App {
			continue
		}
		select {
		case <-d.ch:
		case <-ctx.Done():
			return ctx.Err()
		}
		if d.err != nil {
			return fmt.Errorf("%s: not changed: its provisioning reads facts of app %s, whose change failed", c.App, a)
		}
	}
	return nil
}

// appDone is closed when an app's change is finished; err is its
// failure.
type appDone struct {
	ch  chan struct{}
	err error
}

// dependsOnFacts reports whether any change waits for another.
func dependsOnFacts(changes []plan.Change) bool {
	return slices.ContainsFunc(changes, func(c plan.Change) bool { return len(c.After) > 0 })
}
