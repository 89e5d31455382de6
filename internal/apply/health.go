package apply

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/corralhq/corral/internal/guest"
	"github.com/corralhq/corral/internal/plan"
)

// The values of AppStatus.Health.
const (
	Healthy       = "healthy"
	Unhealthy     = "unhealthy"
	HealthUnknown = "unknown"
)

// statusHealthApps is how many apps `corral status` checks at once, and
// statusHealthTimeout bounds one app's login and checks: status answers
// promptly even when a container does not.
const (
	statusHealthApps    = 8
	statusHealthTimeout = 30 * time.Second
)

// HealthError is a health check that did not pass: the check, how many
// attempts it had, and the last attempt's output.
type HealthError struct {
	Check    string
	Attempts int
	Err      error
	Output   []string
}

func (h *HealthError) Error() string {
	out := strings.Join(h.Output, "\n  ")
	if out == "" {
		out = "(no output)"
	}
	attempts := "attempts"
	if h.Attempts == 1 {
		attempts = "attempt"
	}
	return fmt.Sprintf("unhealthy after %d %s: %v\n  %s", h.Attempts, attempts, h.Err, out)
}

func (h *HealthError) Unwrap() error { return h.Err }

// LastLine is the last line the check printed, or what ended it.
func (h *HealthError) LastLine() string {
	if n := len(h.Output); n > 0 {
		return h.Output[n-1]
	}
	return h.Err.Error()
}

// runChecks runs app's health checks in order, each with its retries, as
// apply does after provisioning; the first that does not pass ends it.
func (g *guests) runChecks(ctx context.Context, app string, cl *guest.Client, checks []Check) error {
	for _, chk := range checks {
		if err := g.step(app, "health", chk.Name, func() error { return g.checkHealth(ctx, cl, chk) }); err != nil {
			return err
		}
	}
	return nil
}

// Health runs apps' health checks outside an apply: after corral start
// and restart, for corral status, and for corral agent's rounds. It holds
// the guest side (the runner, the SSH settings and the apps' checks),
// which is all a check needs.
type Health struct {
	g *guests
}

// Health is the health side of e, over its guest side.
func (e *Executor) Health() *Health {
	return &Health{g: e.guests()}
}

// Wait waits for app's container ct (running) to pass its health checks,
// as apply waits after provisioning: `corral start` and `corral restart`
// fail when it does not come within the checks' retries.
func (h *Health) Wait(ctx context.Context, app string, ct *plan.CT) error {
	g := h.g
	checks := g.work[app].Checks
	if len(checks) == 0 {
		return nil
	}
	var cl *guest.Client
	if err := g.step(app, "ssh", "connect to ct "+strconv.Itoa(ct.VMID), func() error {
		var err error
		cl, err = g.dial(ctx, ct)
		return err
	}); err != nil {
		return fmt.Errorf("ct %d on %s is %s, but its health could not be checked: %w", ct.VMID, ct.Node, ct.Status, err)
	}
	defer cl.Close()
	if err := g.runChecks(ctx, app, cl, checks); err != nil {
		name := "?"
		if he := (*HealthError)(nil); errors.As(err, &he) {
			name = he.Check
		}
		return fmt.Errorf("ct %d on %s is %s, but health check %q did not pass: %w\n"+
			"  to fix: look at the app (corral logs %s, corral exec %s), repair it, and run corral restart %s",
			ct.VMID, ct.Node, ct.Status, name, err, app, app, app)
	}
	return nil
}

// NoHealth marks every app's health unknown, not checked for why.
func (r *StatusReport) NoHealth(why string) {
	for i := range r.Apps {
		r.Apps[i].Health, r.Apps[i].HealthDetail = HealthUnknown, why
	}
}

// Status runs each health check (Executor.Guest) of every app in r whose
// one container runs, once, and sets the app's Health: healthy, unhealthy
// with the failing check and its last line of output, or unknown with
// why. Checks are read-only commands by contract, and nothing else is
// written: a container whose host key corral has not pinned is not
// logged into (apply pins it). redact removes secret values from output.
func (h *Health) Status(ctx context.Context, r *StatusReport, redact func(string) string) {
	sem := make(chan struct{}, statusHealthApps)
	var wg sync.WaitGroup
	g := h.g
	for i := range r.Apps {
		as := &r.Apps[i]
		checks := g.work[as.App].Checks
		ct, why := healthTarget(r.cts[as.App], len(checks))
		gg := g
		if as.Kind == plan.KindVM {
			gg = &guests{runner: g.runner, ssh: g.ssh, work: g.work, vm: true}
			ct, why = vmHealthTarget(r.vms[as.App], len(checks))
		}
		if ct == nil {
			as.Health, as.HealthDetail = HealthUnknown, why
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			as.Health, as.HealthDetail = gg.appHealth(ctx, ct, checks)
			as.HealthDetail = redact(as.HealthDetail)
		}()
	}
	wg.Wait()
}

// healthTarget is the container whose health status can check, or why
// there is none.
func healthTarget(cts []*plan.CT, checks int) (*plan.CT, string) {
	return guestHealthTarget(cts, checks, "ct", "container")
}

// guestHealthTarget is healthTarget for guests of either kind, named in
// its reasons by short ("ct", "vm") and noun ("container", "VM").
func guestHealthTarget(gs []*plan.CT, checks int, short, noun string) (*plan.CT, string) {
	switch {
	case checks == 0:
		return nil, "no health checks"
	case len(gs) == 0:
		return nil, "no " + noun
	case len(gs) > 1:
		return nil, fmt.Sprintf("%d %ss", len(gs), noun)
	case gs[0].Status != "running":
		return nil, fmt.Sprintf("%s %d is %s", short, gs[0].VMID, gs[0].Status)
	case plan.ParseMarker(gs[0].Config["description"]).HostKey == "":
		return nil, fmt.Sprintf("%s %d has no SSH host key pinned by corral yet; corral apply pins it", short, gs[0].VMID)
	}
	return gs[0], ""
}

// appHealth logs into ct and runs each check once, without its retries.
func (g *guests) appHealth(ctx context.Context, ct *plan.CT, checks []Check) (string, string) {
	ctx, cancel := context.WithTimeout(ctx, statusHealthTimeout)
	defer cancel()
	cl, err := g.dial(ctx, ct)
	if err != nil {
		return HealthUnknown, fmt.Sprintf("could not log into %s %d: %v", g.noun(), ct.VMID, err)
	}
	defer cl.Close()
	for _, chk := range checks {
		chk.Retries = 0
		err := g.checkHealth(ctx, cl, chk)
		var he *HealthError
		var exit *guest.ExitError
		switch {
		case err == nil:
			continue
		case errors.As(err, &he) && errors.As(err, &exit):
			return Unhealthy, fmt.Sprintf("check %q: %s", chk.Name, he.LastLine())
		default:
			return HealthUnknown, fmt.Sprintf("check %q could not run: %v", chk.Name, err)
		}
	}
	return Healthy, ""
}

// CheckOnce logs into app's running container and runs one health check
// once (chk.Retries is ignored): corral agent counts consecutive failures
// itself, across its rounds, before it restarts the app. The host key
// must be the one corral pinned.
func (h *Health) CheckOnce(ctx context.Context, ct *plan.CT, chk Check) error {
	cl, err := h.g.dial(ctx, ct)
	if err != nil {
		return err
	}
	defer cl.Close()
	chk.Retries = 0
	return h.g.checkHealth(ctx, cl, chk)
}
