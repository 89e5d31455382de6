package doctor_test

import (
	"slices"
	"testing"

	"github.com/corralhq/corral/internal/doctor"
	"github.com/corralhq/corral/internal/manifest"
)

// TestRequirements_vmVolumes: a VM app's retained disks need their
// storages' Datastore.AllocateSpace and, on /vms (the keeper VM's VMID
// is not known before it exists), what creating the keeper VM and
// moving disks into and out of it take; a VM app without volumes needs
// none of the keeper VM's rows.
func TestRequirements_vmVolumes(t *testing.T) {
	vm := func(vols ...manifest.Volume) *manifest.File {
		return file(app("db", func(a *manifest.App) {
			a.Kind, a.Template = manifest.KindVM, ""
			a.VM = &manifest.VM{Image: manifest.DefaultVMImage, DiskStorage: "local-lvm", DiskSize: 2 * manifest.GiB}
			a.Volumes = vols
		}))
	}
	keeperRow := func(reqs []doctor.Requirement) bool {
		return slices.ContainsFunc(reqs, func(r doctor.Requirement) bool {
			return r.Path == "/vms" && r.Priv == "VM.Allocate" && r.Propagate && r.Operation == "create the keeper VM of app db's disks"
		})
	}
	reqs := doctor.Requirements(vm(manifest.Volume{Name: "data", Storage: "nfs", Size: manifest.GiB}), doctor.Targets{DefaultNode: "pve"})
	if !keeperRow(reqs) || !slices.Contains(pathPrivs(reqs)["/storage/nfs"], "Datastore.AllocateSpace") {
		t.Fatalf("a VM app with a volume on nfs: %v", pathPrivs(reqs))
	}
	for _, r := range reqs {
		if r.Operation == "" || r.Why == "" {
			t.Errorf("requirement %+v lacks operation or why", r)
		}
	}
	if reqs := doctor.Requirements(vm(), doctor.Targets{DefaultNode: "pve"}); keeperRow(reqs) {
		t.Fatalf("a VM app without volumes needs the keeper VM: %v", pathPrivs(reqs))
	}
}
