package apply

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/wait"
)

// defaultCreateWait is how long a settle wait waits for containers in
// creation when its caller names no bound.
const defaultCreateWait = 3 * time.Minute

// settleWait lists the cluster's guests until no container in creation
// (lock: create) holds it up, nor, with busy, any task it waits for. PVE
// shows a container's real config (tags, Notes) only once its create
// task ends, so a container in creation cannot be told apart from
// another's: Observe waits for them before it plans (guestsSettled), the
// lock before it reads the other keepers' leases (settledOn). The two
// differ only in the rules below.
type settleWait struct {
	limit time.Duration // how long creates or busy tasks may hold it up
	// keep drops from each listing what the wait does not see (nil: all
	// is seen); what it keeps is the result.
	keep func([]resource) []resource
	// holds says whether a guest still being created holds the wait up.
	holds func(resource) bool
	// busy reads what else still runs on nodes (nil: nothing is waited
	// for) before each listing of the guests, and returns what of it
	// holds the wait up once the listing is known. Read in that order, a
	// task that ends between the two reads shows in the listing as its
	// end state (a stopped or vanished container); read the other way,
	// the listing could show a container running that a task stopped a
	// moment later.
	busy func(nodes []string) (func([]resource) []string, error)
	// busyNodes are the nodes busy reads before the first listing; a
	// listing that shows a guest busy cares about (watched) on another
	// node is not used: busy reads that node too and the guests are
	// listed again, so every node a result's guests are on had its tasks
	// read before that result's listing (issue 30: a plan on a cluster
	// without corral's guests reads no task list).
	busyNodes []string
	watched   func([]resource) []string // the nodes of the guests busy cares about
	// tooLong is the error when creates hold the wait up after limit.
	tooLong func(creating []resource) error
	onWait  func(string) // nil: the waits are not reported
}

// run is the wait: it polls at 100 ms doubling up to 2 s, says at once
// when a placeholder's create task already failed (deadCreates: no wait
// clears it), and gives up after limit.
func (w settleWait) run(ctx context.Context, c *pve.Client) ([]resource, error) {
	deadline := time.Now().Add(w.limit)
	delay := 100 * time.Millisecond
	nodes := w.busyNodes
	reported := false
	for {
		var busyIn func([]resource) []string
		if w.busy != nil {
			var err error
			if busyIn, err = w.busy(nodes); err != nil {
				return nil, err
			}
		}
		res, err := c.ClusterResources(ctx, "vm")
		if err != nil {
			return nil, fmt.Errorf("list guests: %w", err)
		}
		if w.keep != nil {
			res = w.keep(res)
		}
		if unread := w.unread(res, nodes); len(unread) > 0 {
			nodes = slices.Concat(nodes, unread)
			continue
		}
		var creating []resource
		for _, r := range res {
			if (r.Type == "lxc" || r.Type == "qemu") && r.Lock == "create" && w.holds(r) { // a VM app's create too
				creating = append(creating, r)
			}
		}
		var waiting string
		if len(creating) == 0 {
			if waiting, err = w.busyNow(busyIn, res, deadline); err != nil {
				return nil, err
			}
			if waiting == "" {
				return res, nil
			}
		} else {
			if msg := deadCreates(ctx, c, creating); msg != "" {
				return nil, errors.New(msg)
			}
			waiting = fmt.Sprintf("waiting for container(s) %s to finish being created", strings.Join(guestsOn(creating), ", "))
			if time.Now().After(deadline) {
				if w.onWait != nil && !reported {
					w.onWait(waiting) // what it waited for, even when its first look came too late
				}
				return nil, w.tooLong(creating)
			}
		}
		if w.onWait != nil {
			w.onWait(waiting)
			reported = true
		}
		if err := wait.Sleep(ctx, delay); err != nil {
			return nil, err
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// unread are the nodes of the guests busy cares about in res whose
// tasks were not read before res was listed (not in read).
func (w settleWait) unread(res []resource, read []string) []string {
	if w.busy == nil || w.watched == nil {
		return nil
	}
	var out []string
	for _, n := range w.watched(res) {
		if !slices.Contains(read, n) && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// busyNow is what the wait still waits for once no create holds it up
// ("" when nothing: res is the result), or the error that ends it.
func (w settleWait) busyNow(busyIn func([]resource) []string, res []resource, deadline time.Time) (string, error) {
	if busyIn == nil {
		return "", nil
	}
	busy := busyIn(res)
	if len(busy) == 0 {
		return "", nil
	}
	if time.Now().After(deadline) {
		return "", fmt.Errorf("%s still running after %s; wait for it to end (Datacenter > Tasks) and run again", strings.Join(busy, ", "), w.limit)
	}
	return "waiting for " + strings.Join(busy, ", ") + " to end", nil
}

// guestsOn names guests as "VMID on node".
func guestsOn(res []resource) []string {
	var out []string
	for _, r := range res {
		out = append(out, fmt.Sprintf("%d on %s", r.VMID, r.Node))
	}
	return out
}
