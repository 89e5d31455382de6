package apply

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
)

// StatusReport is what `corral status` says: each app's containers,
// volumes and drift from the manifest, and each keeper's state.
type StatusReport struct {
	Apps []AppStatus `json:"apps"`
	// InSync: the plan has no changes and was not refused.
	InSync  bool           `json:"in_sync"`
	Keepers []KeeperStatus `json:"keepers"`

	// CannotSeeGuests: the token lacks VM.Audit on /vms, so nothing
	// can be said about the apps (Observed.CannotSeeGuests).
	CannotSeeGuests bool `json:"-"`
	// GuestUnknown lists, by app, the references that could not be read,
	// so provisioning was not compared.
	GuestUnknown map[string][]string `json:"-"`

	// cts are each app's containers as observed, for Health.Status,
	// vms each VM app's VMs.
	cts map[string][]*plan.CT
	vms map[string][]*plan.VM
}

// AppStatus is one app in a StatusReport.
type AppStatus struct {
	App string `json:"app"`
	// Kind is "ct" or "vm" (the manifest's kind:); a VM app's VMs are
	// in VMs (vmstatus.go), its Containers empty.
	Kind       string            `json:"kind"`
	VMs        []CTStatus        `json:"vms,omitempty"`
	Containers []CTStatus        `json:"containers"`
	Volumes    []plan.VolumeInfo `json:"volumes"`
	// Drift is the plan's action for the app: "no-op" when the cluster
	// matches the manifest, "unknown" when there is no plan.
	Drift   string   `json:"drift"`
	Reasons []string `json:"reasons"`
	// Moving is set while a move of the app is under way or was
	// interrupted (its carrier exists).
	Moving *MoveStatus `json:"moving,omitempty"`
	// Rescue is set while the app is in rescue (corral rescue): its
	// rescue container holds the app's volumes.
	Rescue *RescueStatus `json:"rescue,omitempty"`
	// Health is Healthy, Unhealthy or HealthUnknown, from one run of the
	// app's health checks (Health.Status); HealthDetail names the
	// failing check and its last line of output, or why it is unknown.
	Health       string `json:"health"`
	HealthDetail string `json:"health_detail"`
}

// MoveStatus is a move in progress, read from its carrier's Notes (the
// move's intent record).
type MoveStatus struct {
	From string `json:"from"`
	To   string `json:"to"`
	// Phase is plan.MoveCarrying, MoveMigrating, MoveHanding or
	// MoveFinishing; for a VM app's move, MovePhaseVMMigrating, with no
	// carrier (CarrierVMID 0, vmstatus.go).
	Phase       string `json:"phase"`
	CarrierVMID int    `json:"carrier_vmid"`
	CarrierNode string `json:"carrier_node"`
	// Carried counts the volumes the carrier holds now, of Volumes named
	// by its Notes.
	Carried int `json:"carried"`
	Volumes int `json:"volumes"`
	// Fix says how to finish the move, or roll it back.
	Fix string `json:"fix"`
}

// RescueStatus is an app's rescue container as status shows it.
type RescueStatus struct {
	VMID    int            `json:"rescue_vmid"`
	Node    string         `json:"node"`
	Status  string         `json:"status"`
	Volumes []RescueVolume `json:"volumes"`
	// Fix says how to end the rescue.
	Fix string `json:"fix"`
}

func rescueStatus(r *plan.Rescue) *RescueStatus {
	rs := &RescueStatus{VMID: r.VMID, Node: r.Node, Status: r.Status, Volumes: []RescueVolume{}, Fix: r.Fix()}
	for _, h := range r.Holds {
		rs.Volumes = append(rs.Volumes, RescueVolume{Key: h.Key, Volume: h.Volume, Mount: h.Path})
	}
	return rs
}

// moveStatus describes app's move from its carrier.
func moveStatus(app string, car *plan.Carrier, obs *plan.Observed) *MoveStatus {
	appNode := ""
	if cts := obs.Apps[app]; len(cts) == 1 {
		appNode = cts[0].Node
	}
	n := car.Notes
	m := &MoveStatus{From: n.From, To: n.To, Phase: car.MovePhase(appNode), CarrierVMID: car.VMID, CarrierNode: car.Node,
		Carried: len(car.Holds()), Volumes: len(n.Carrying)}
	if car.Node == n.To {
		m.Fix = fmt.Sprintf("run corral apply (or the corral move or drain that started it) to finish it; it can no longer be rolled back (the carrier is on %s): to have %s on %s again, let it finish, then set node: %s for it and run corral apply", n.To, app, n.From, n.From)
	} else {
		m.Fix = fmt.Sprintf("run corral apply (or the corral move or drain that started it) to finish it; to roll it back instead, set node: %s for %s in the manifest and run corral apply (its volumes go back to the keeper on %s)", n.From, app, n.From)
	}
	return m
}

// CTStatus is one of an app's containers.
type CTStatus struct {
	VMID   int    `json:"vmid"`
	Node   string `json:"node"`
	Status string `json:"status"`
	Lock   string `json:"lock,omitempty"`
	IP     string `json:"ip,omitempty"`
	// HAState is the state PVE's HA has the container in (started,
	// fence, recovery, error, …) when it is an HA resource (ha:).
	HAState string `json:"ha_state,omitempty"`
}

// KeeperStatus is one keeper: what a repair would fix (protection left
// off by a killed corral, Notes edited, a mount point removed) and who
// holds corral's lock on its node.
type KeeperStatus struct {
	VMID      int      `json:"vmid"`
	Node      string   `json:"node"`
	Protected bool     `json:"protected"`
	Problems  []string `json:"problems"`
	Lock      string   `json:"lock,omitempty"`
}

// Status observes the cluster and plans apps against it, read-only, and
// reports where each app stands. redact removes secret values from the
// plan's reasons. A refused plan is drift, not an error.
func Status(ctx context.Context, c *pve.Client, apps []plan.App, redact func(string) string) (*StatusReport, error) {
	// A VM's migration is shown as it runs (vmMoveStatus), not waited for.
	obs, err := ObserveWith(ctx, c, ObserveOptions{Migrating: true})
	if err != nil {
		return nil, err
	}
	if err := ObserveApps(ctx, c, obs, apps); err != nil {
		return nil, err
	}
	p, perr := plan.Make(apps, obs)
	var refused *plan.RefusedError
	if perr != nil && !errors.As(perr, &refused) {
		return nil, perr
	}
	r := &StatusReport{CannotSeeGuests: obs.CannotSeeGuests, GuestUnknown: map[string][]string{}, cts: obs.Apps, vms: obs.VMs,
		InSync: refused == nil && (p == nil || p.Converged())}
	inv := plan.Inventory(obs)
	for _, a := range apps {
		as := AppStatus{App: a.Name, Containers: []CTStatus{}, Volumes: []plan.VolumeInfo{}, Drift: "unknown", Reasons: []string{},
			Health: HealthUnknown, HealthDetail: "not checked"}
		if as.Containers, err = containerStatuses(ctx, c, obs.Apps[a.Name]); err != nil {
			return nil, err
		}
		if as.Kind, as.VMs, err = vmStatuses(ctx, c, &a, obs.VMs[a.Name]); err != nil {
			return nil, err
		}
		for _, v := range inv {
			if v.App == a.Name && v.Kind != plan.KindVM { // a VM app's: VMVolumeInventory, by the manifest's names
				as.Volumes = append(as.Volumes, v)
			}
		}
		as.Volumes = append(as.Volumes, plan.VMVolumeInventory(&a, obs)...)
		if obs.CannotSeeGuests {
			node := ""
			if len(obs.Nodes) > 0 {
				node = obs.Nodes[0]
			}
			as.Reasons = append(as.Reasons, plan.BlindReason(a.Name, node))
		}
		appDrift(&as, p, refused, redact)
		if car := obs.Carriers[a.Name]; car != nil {
			as.Moving = moveStatus(a.Name, car, obs)
		}
		for _, vm := range obs.VMs[a.Name] {
			if m := vmMoveStatus(ctx, c, a.Name, vm); m != nil { // vmstatus.go
				as.Moving = m
			}
		}
		if rs := obs.Rescues[a.Name]; len(rs) > 0 {
			as.Rescue = rescueStatus(rs[0])
		}
		if len(a.GuestUnknown) > 0 {
			r.GuestUnknown[a.Name] = a.GuestUnknown
		}
		r.Apps = append(r.Apps, as)
	}
	r.Keepers = keeperStatus(obs, p)
	return r, nil
}

// appDrift says what apply would do to as's app (the plan's change or
// unchecked note), or why it would not (the plan's refusal that names
// it), with the reasons redacted.
func appDrift(as *AppStatus, p *plan.Plan, refused *plan.RefusedError, redact func(string) string) {
	if p != nil {
		for _, ch := range p.Changes {
			if ch.App == as.App {
				as.Drift = ch.Action.String()
				for _, why := range ch.Reasons {
					as.Reasons = append(as.Reasons, redact(why))
				}
			}
		}
	}
	if p != nil {
		for _, u := range p.Unchecked {
			if u.App == as.App {
				as.Drift = "unchecked"
				as.Reasons = append(as.Reasons, redact(u.Why))
			}
		}
	}
	if refused != nil && as.Drift == "unknown" {
		// A refused app has no change in the plan: its refusal says why.
		for _, prob := range refused.Problems {
			if refusalNames(prob, as.App) {
				as.Drift = "refused"
				as.Reasons = append(as.Reasons, redact(prob))
			}
		}
	}
}

// containerStatuses are the status lines of an app's containers, each
// with its address.
func containerStatuses(ctx context.Context, c *pve.Client, cts []*plan.CT) ([]CTStatus, error) {
	out := []CTStatus{}
	for _, ct := range cts {
		ip, err := Address(ctx, c, ct)
		if err != nil {
			return nil, err
		}
		cs := CTStatus{VMID: ct.VMID, Node: ct.Node, Status: ct.Status, Lock: ct.Lock, IP: ip}
		if ct.HA != nil {
			cs.HAState = ct.HAState
		}
		out = append(out, cs)
	}
	return out, nil
}

// refusalNames says whether a plan's refusal is about app: it names the
// app ("app web: …") or one of its volumes ("web/data (…)").
func refusalNames(prob, app string) bool {
	return strings.HasPrefix(prob, "app "+app+":") || strings.Contains(prob, " "+app+"/")
}

// keeperStatus reports every keeper; p (nil when the plan was refused)
// says what apply would repair.
func keeperStatus(obs *plan.Observed, p *plan.Plan) []KeeperStatus {
	out := []KeeperStatus{}
	for _, node := range obs.Nodes {
		for _, k := range obs.Keepers[node] {
			ks := KeeperStatus{VMID: k.VMID, Node: node, Protected: k.Protected, Problems: []string{}}
			if p != nil {
				for _, kc := range p.Keepers {
					if kc.VMID == k.VMID {
						for _, why := range kc.Reasons {
							ks.Problems = append(ks.Problems, why+" (corral apply repairs it)")
						}
					}
				}
			} else if !k.Protected {
				ks.Problems = append(ks.Problems, "protection is off (corral apply repairs it)")
			}
			// The lease is in the node's first keeper, or in a younger
			// one a lock created on an empty node (lockclaim.go).
			if k.Lease != nil {
				ks.Lock = k.Lease.String() + " until " + k.Lease.Until.UTC().Format(time.RFC3339)
			}
			out = append(out, ks)
		}
	}
	return out
}
