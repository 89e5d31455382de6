package ui

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/ui/human"
)

// WriteStatus prints `corral status`: a row per container (or per app
// without one), the reasons for drift, then the apps' volumes.
func WriteStatus(w io.Writer, r *apply.StatusReport) {
	t := NewTable(w, "APP", "CT", "NODE", "STATUS", "HEALTH", "IP", "DRIFT")
	for _, as := range r.Apps {
		if len(as.Containers) == 0 && len(as.VMs) == 0 {
			state := "not created"
			if r.CannotSeeGuests {
				state = "cannot see"
			}
			if as.Moving != nil {
				state = "moving"
			}
			t.Row(as.App, "-", "-", state, Dash(as.Health), "-", DriftText(as.Drift))
		}
		for _, ct := range as.Containers {
			status := guestStatus(ct)
			if as.Moving != nil {
				status += " (moving " + as.Moving.From + " → " + as.Moving.To + ")"
			}
			if as.Rescue != nil {
				status += " (in rescue)"
			}
			t.Row(as.App, strconv.Itoa(ct.VMID), ct.Node, status, Dash(as.Health), Dash(ct.IP), DriftText(as.Drift))
		}
		for _, vm := range as.VMs { // a kind: vm app's VM, marked as one
			status := guestStatus(vm)
			if as.Moving != nil {
				status += " (moving " + as.Moving.From + " → " + as.Moving.To + ")"
			}
			t.Row(as.App, strconv.Itoa(vm.VMID)+" (vm)", vm.Node, status, Dash(as.Health), Dash(vm.IP), DriftText(as.Drift))
		}
	}
	t.Flush()
	for _, as := range r.Apps {
		if m := as.Moving; m != nil && m.Phase == apply.MovePhaseVMMigrating {
			fmt.Fprintf(w, "  %s: moving from %s to %s, migrating: %s\n", as.App, m.From, m.To, m.Fix)
		} else if m != nil {
			fmt.Fprintf(w, "  %s: moving from %s to %s, %s (carrier ct %d on %s holds %d of %d volumes): %s\n",
				as.App, m.From, m.To, m.Phase, m.CarrierVMID, m.CarrierNode, m.Carried, m.Volumes, m.Fix)
		}
		if rs := as.Rescue; rs != nil {
			fmt.Fprintf(w, "  %s: in rescue: rescue ct %d on %s (%s) holds %d volume(s): %s\n",
				as.App, rs.VMID, rs.Node, rs.Status, len(rs.Volumes), rs.Fix)
		}
		for _, why := range as.Reasons {
			fmt.Fprintf(w, "  %s: %s\n", as.App, why)
		}
		if as.Health == apply.Unhealthy {
			fmt.Fprintf(w, "  %s: unhealthy: %s\n", as.App, as.HealthDetail)
		}
	}
	for _, as := range r.Apps {
		if u := r.GuestUnknown[as.App]; len(u) > 0 {
			fmt.Fprintf(w, "  %s: provisioning not compared: %s could not be read (plan and apply need it)\n", as.App, strings.Join(u, ", "))
		}
	}
	for _, k := range r.Keepers {
		for _, p := range k.Problems {
			fmt.Fprintf(w, "  keeper %d on %s: %s\n", k.VMID, k.Node, p)
		}
		if k.Lock != "" {
			fmt.Fprintf(w, "  keeper %d on %s: locked by %s\n", k.VMID, k.Node, k.Lock)
		}
	}
	var vols []plan.VolumeInfo
	for _, as := range r.Apps {
		vols = append(vols, as.Volumes...)
	}
	if len(vols) > 0 {
		fmt.Fprintln(w)
		WriteVolumes(w, vols)
	}
}

// DriftText is a plan action as a DRIFT column shows it: "in sync" for
// no-op (the JSON keeps the action itself).
func DriftText(action string) string {
	if action == "no-op" {
		return "in sync"
	}
	return action
}

// WriteVolumes prints volumes as `corral volumes` lists them; none is
// said in a sentence, not an empty table.
func WriteVolumes(w io.Writer, inv []plan.VolumeInfo) {
	if len(inv) == 0 {
		fmt.Fprintln(w, "No volumes: corral keeps none on this cluster yet.")
		return
	}
	t := NewTable(w, "APP", "VOLUME", "VOLID", "NODE", "SIZE", "ATTACHED", "MOUNT", "PROJECT")
	for _, v := range inv {
		size := human.Size(v.Size)
		if v.Missing {
			size = "MISSING"
		}
		mount := Dash(v.Mount)
		if v.Serial != "" {
			mount = "disk serial " + v.Serial // a VM's volume: the guest mounts it by its serial
		}
		t.Row(v.App, v.Name, v.VolID, v.Node, size, v.Holder, mount, Dash(v.Project))
	}
	t.Flush()
}

// WriteUnlocked prints what `corral unlock` did, a line a node.
func WriteUnlocked(w io.Writer, rows []apply.Unlocked) {
	for _, r := range rows {
		if r.Broken == nil {
			fmt.Fprintf(w, "node %s: not locked\n", r.Node)
		} else {
			fmt.Fprintf(w, "node %s: broke the lock of %s\n", r.Node, r.Broken)
		}
	}
}

// guestStatus is a guest's status with its lock and HA state, a
// container's or a VM's alike.
func guestStatus(g apply.CTStatus) string {
	status := g.Status
	if g.Lock != "" {
		status += " (locked: " + g.Lock + ")"
	}
	if g.HAState != "" {
		status += " (HA: " + g.HAState + ")"
	}
	return status
}
