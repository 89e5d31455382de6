package plan_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/plan"
)

// vmFreeObs is a node whose keeper VM 900 (protection off) holds web's
// data (project shop, declared by manifest /a), blog's posts (project
// other), legacy's files (no project line) and a disk whose serial no
// Notes line names.
func vmFreeObs() *plan.Observed {
	var n plan.VMKeeperNotes
	n.Note(plan.VMVolumeSerial("web", "data"), "web", "data", "shop", "host:/a/corral.yaml")
	n.Note(plan.VMVolumeSerial("blog", "posts"), "blog", "posts", "other", "host:/c/corral.yaml")
	n.Note(plan.VMVolumeSerial("legacy", "files"), "legacy", "files", "", "")
	disk := func(n, serial string) string { return "local-lvm:vm-900-disk-" + n + ",serial=" + serial + ",size=1G" }
	conf := map[string]string{"description": n.String(),
		"scsi0": disk("0", plan.VMVolumeSerial("web", "data")), "scsi1": disk("1", plan.VMVolumeSerial("blog", "posts")),
		"scsi2": disk("2", plan.VMVolumeSerial("legacy", "files")), "scsi3": disk("3", plan.VMVolumeSerial("gone", "x"))}
	return &plan.Observed{VMKeepers: map[string][]*plan.VMKeeper{"pve": {{VMID: 900, Node: "pve", Config: conf}}}}
}

// TestPruneVMDisks: prune frees a removed VM app's disk of this project
// from the keeper VM (kind vm, its serial), leaves another project's,
// names the disks of no project or no app, plans the keeper VM's
// protection set again, and under a defaulted project refuses a disk
// another manifest declared.
func TestPruneVMDisks(t *testing.T) {
	other := plan.App{Name: "other", Kind: plan.KindVM, Project: "shop", ProjectSet: true, Origin: "project shop"}
	p, err := plan.Prune("shop", []plan.App{other}, vmFreeObs(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Volumes) != 1 {
		t.Fatalf("pruned %+v, want web/data alone", p.Volumes)
	}
	v := p.Volumes[0]
	if v.Kind != plan.KindVM || v.App != "web" || v.VolID != "local-lvm:vm-900-disk-0" || v.Keeper != 900 || v.Serial != plan.VMVolumeSerial("web", "data") ||
		v.Size != 1<<30 || v.Project != "shop" || v.Reason != "app web is not in the manifest" {
		t.Errorf("pruned %+v", v)
	}
	w := strings.Join(p.Warnings, "\n")
	for _, s := range []string{"volume legacy/files (local-lvm:vm-900-disk-2) has no project", "holds local-lvm:vm-900-disk-3 recorded for no app"} {
		if !strings.Contains(w, s) {
			t.Errorf("warnings lack %q:\n%s", s, w)
		}
	}
	if len(p.Reprotect) != 1 || p.Reprotect[0] != (plan.KeeperRef{Node: "pve", VMID: 900}) || strings.Join(p.Nodes(), " ") != "pve" {
		t.Errorf("reprotect %+v, nodes %v", p.Reprotect, p.Nodes())
	}

	defaulted := plan.App{Name: "other", Kind: plan.KindVM, Project: "shop", Origin: "host:/b/corral.yaml"}
	_, err = plan.Prune("shop", []plan.App{defaulted}, vmFreeObs(), nil)
	var refused *plan.RefusedError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "volume web/data (local-lvm:vm-900-disk-0) was declared by another manifest") {
		t.Errorf("prune from another manifest under a defaulted project: %v", err)
	}

	_, err = plan.Prune("shop", []plan.App{other}, vmFreeObs(), map[string][]string{"pve/local-lvm:vm-900-disk-0": {"VM 200 scsi1"}})
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "is referenced by VM 200 scsi1") {
		t.Errorf("prune of a disk another VM names: %v", err)
	}
}

// TestFreeVMDisks: volumes rm frees a keeper VM's disk by volid, the
// unnamed one too, and refuses another project's and a declared one.
func TestFreeVMDisks(t *testing.T) {
	web := plan.App{Name: "web", Kind: plan.KindVM, Project: "shop", ProjectSet: true, Volumes: []plan.Volume{{Name: "data"}}}
	p, err := plan.FreeVolumes("shop", nil, vmFreeObs(), []string{"local-lvm:vm-900-disk-3", "local-lvm:vm-900-disk-0"}, nil)
	if err != nil || strings.Join(p.VolIDs(), " ") != "local-lvm:vm-900-disk-3 local-lvm:vm-900-disk-0" || p.Volumes[0].Kind != plan.KindVM {
		t.Fatalf("rm: %+v %v", p, err)
	}
	for volid, want := range map[string]string{
		"local-lvm:vm-900-disk-1": "is volume blog/posts of project other",
		"local-lvm:vm-900-disk-0": "which app web declares in the manifest",
	} {
		_, err := plan.FreeVolumes("shop", []plan.App{web}, vmFreeObs(), []string{volid}, nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("rm %s: %v, want %q", volid, err, want)
		}
	}
}
