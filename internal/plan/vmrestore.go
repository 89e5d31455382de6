package plan

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/corralhq/corral/internal/manifest"
)

// A VM app's restore (issue 34) is in flight from the qmrestore that
// makes its new VM until that VM carries the app's tags: the new VM is
// tagged corral-restoring-<app> and its Notes carry the restore's stamp
// and, as corral-vm-volume lines, which retained disk each archived
// serial is (app/volume=serial). Until then the planner leaves the app
// alone and the next changing command finishes or rolls the restore back
// (apply's Recover): the new VM's disks carry the archived serials, which
// the app's own disks may carry too, so no plan may count them.

// VMRestore is an interrupted restore of a VM app.
type VMRestore struct {
	App      string
	New      *VM // tagged corral-restoring-<app>; nil once it became the app's
	Replaced *VM // tagged corral-replaced-<app>; nil before it was set aside
	Stamp    string
}

// Rollback reports whether the restore is undone rather than finished:
// the app still has its own VM (a --replace stopped before the old VM
// was set aside), or the new VM's Notes lost the stamp. A rollback
// destroys the new VM with its disks: they are the archive's copies, and
// the displaced disks are renamed only once the old VM is set aside.
func (r *VMRestore) Rollback(o *Observed) bool {
	return r.New != nil && (len(o.VMs[r.App]) > 0 || r.Stamp == "")
}

// String says what the next changing command does about it.
func (r *VMRestore) String(o *Observed) string {
	switch {
	case r.Rollback(o):
		keeps := "the app has no VM until the next apply makes one"
		if vms := o.VMs[r.App]; len(vms) > 0 {
			keeps = fmt.Sprintf("the app keeps VM %d and its disks", vms[0].VMID)
		}
		return fmt.Sprintf("a restore of VM app %s was interrupted before the restored VM %d took over: it is removed with its disks (copies the archive still holds) and %s", r.App, r.New.VMID, keeps)
	case r.New != nil:
		return fmt.Sprintf("a restore of VM app %s was interrupted after it began: the restored VM %d becomes the app's (its disks take the app's serials, the disks they displace stay on the keeper VM as *-replaced-%s) and a replaced VM is removed (its retained disks stay on the keeper VM)", r.App, r.New.VMID, r.Stamp)
	default:
		return fmt.Sprintf("a restore of VM app %s left the replaced VM %d: it is removed (its retained disks go to the keeper VM first)", r.App, r.Replaced.VMID)
	}
}

// Nodes are the nodes of the restore's VMs.
func (r *VMRestore) Nodes() []string {
	var out []string
	for _, vm := range []*VM{r.New, r.Replaced} {
		if vm != nil && !slices.Contains(out, vm.Node) {
			out = append(out, vm.Node)
		}
	}
	return out
}

// VMVolumeLines are the corral-vm-volume lines of records (serial →
// volume), as a keeper VM's Notes write them, for a restored VM's Notes.
func VMVolumeLines(records map[string]VolumeKey) string {
	var b strings.Builder
	for _, serial := range slices.Sorted(maps.Keys(records)) {
		fmt.Fprintf(&b, "%s%s=%s\n", markerVMVolume, records[serial], serial)
	}
	return b.String()
}

// WithoutVMVolumeLines drops the corral-vm-volume lines and the restore
// marker of a restored VM's Notes: what is left is the app's Notes.
func WithoutVMVolumeLines(desc string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(WithoutRestoreMarker(desc), "\n") {
		if !strings.HasPrefix(manifest.MarkerLine(line), markerVMVolume) {
			b.WriteString(line)
		}
	}
	return b.String()
}

// VMChangedElsewhere is ChangedElsewhere for a VM app's VM: under a
// defaulted project, what (in words) is refused to the VM of app that
// another manifest declared.
func VMChangedElsewhere(app string, vm *VM, project, origin string, explicit bool, what string) string {
	by := ParseMarker(vm.Config["description"]).Declared
	if explicit || origin == "" || by == "" || by == origin {
		return ""
	}
	return fmt.Sprintf("app %s: VM %d on %s was declared by %s, not by this manifest (%s): corral does not change another manifest's app (this would %s). %s",
		app, vm.VMID, vm.Node, declarer(by), origin, what, collisionFix(project))
}
