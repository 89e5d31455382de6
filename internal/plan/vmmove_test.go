package plan_test

import (
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/plan"
)

// vmMoveObs is vmConverged on two nodes, the VM 120 on pve1 holding
// web's retained disk data; keeperDisks go to a keeper VM on their node
// (node → volume name → volid).
func vmMoveObs(keeperDisks map[string]map[string]string) *plan.Observed {
	obs := vmConverged()
	obs.Nodes = []string{"pve1", "pve2"}
	vm := obs.VMs["web"][0]
	vm.Node = "pve1"
	vm.Config["scsi1"] = "local-lvm:vm-120-disk-1,serial=" + plan.VMVolumeSerial("web", "data") + ",size=1G"
	obs.Storages = map[string]map[string][]string{"pve1": {"local-lvm": {"images"}}, "pve2": {"local-lvm": {"images"}}}
	obs.VMKeepers = map[string][]*plan.VMKeeper{}
	for node, disks := range keeperDisks {
		conf := map[string]string{"protection": "1"}
		i := 0
		for name, volid := range disks {
			conf["scsi"+string(rune('0'+i))] = volid + ",serial=" + plan.VMVolumeSerial("web", name) + ",size=1G"
			i++
		}
		obs.VMKeepers[node] = []*plan.VMKeeper{{VMID: 900, Node: node, Config: conf}}
	}
	return obs
}

// TestVMMoveChange: a VM app whose manifest names another node moves:
// its disk on the VM moves with it, one in the source's keeper VM is
// gathered first, a new one or one in the target's keeper VM is
// attached there, a dropped one stays on the source; what PVE would
// refuse (snapshots, a storage the target lacks, an offline node) and a
// replace in the same apply are refused.
func TestVMMoveChange(t *testing.T) {
	withVols := func(names ...string) plan.App {
		a := vmApp()
		a.Node = "pve2"
		for _, n := range names {
			a.Volumes = append(a.Volumes, plan.Volume{Name: n, Storage: "local-lvm", Size: 1 << 30, Reclaim: plan.Retain})
		}
		return a
	}
	for _, tc := range []struct {
		name    string
		app     plan.App
		obs     func(*plan.Observed)
		keepers map[string]map[string]string
		vols    map[string]plan.VolumeAction // want, by name
		reason  string                       // in the reasons
		refused string                       // in the refusal
	}{
		{name: "disk on the VM moves with it", app: withVols("data"), vols: map[string]plan.VolumeAction{"data": plan.VolMove},
			reason: "node changes pve1 → pve2: VM 120 stops and migrates offline (same VMID and config); its own disk scsi0 goes with it, and so do its retained disks (data), attached to it"},
		{name: "disk in the source keeper VM is gathered", app: withVols("data", "logs"), keepers: map[string]map[string]string{"pve1": {"logs": "local-lvm:vm-900-disk-0"}},
			vols: map[string]plan.VolumeAction{"data": plan.VolMove, "logs": plan.VolMove}, reason: "retained disks the keeper VM on pve1 holds (logs) are attached to the VM there first"},
		{name: "a new disk is created on the target", app: withVols("data", "cache"), vols: map[string]plan.VolumeAction{"data": plan.VolMove, "cache": plan.VolCreate},
			reason: "(cache) are attached on pve2 after the migration, from the keeper VM there (created there when it holds none); a keeper VM is created on pve2"},
		{name: "a disk in the target keeper VM is attached there", app: withVols("data", "old"), keepers: map[string]map[string]string{"pve2": {"old": "local-lvm:vm-900-disk-0"}},
			vols: map[string]plan.VolumeAction{"data": plan.VolMove, "old": plan.VolAttach}},
		// Named by its serial: no keeper VM's Notes name it here.
		{name: "a dropped disk stays on the source", app: withVols(), vols: map[string]plan.VolumeAction{plan.VMVolumeSerial("web", "data"): plan.VolDetach},
			reason: "retained disks the manifest no longer lists (" + plan.VMVolumeSerial("web", "data") + ") are given back to the keeper VM on pve1 before the migration"},
		{name: "a disk in a third node's keeper VM is refused", app: withVols("data", "far"), obs: func(o *plan.Observed) {
			o.Nodes = append(o.Nodes, "pve3")
			o.VMKeepers["pve3"] = []*plan.VMKeeper{{VMID: 901, Node: "pve3", Config: map[string]string{"scsi0": "local-lvm:vm-901-disk-0,serial=" + plan.VMVolumeSerial("web", "far") + ",size=1G"}}}
		}, refused: "is held by keeper VM 901 on node pve3, not pve1"},
		{name: "snapshots are refused", app: withVols("data"), obs: func(o *plan.Observed) { o.VMs["web"][0].Config["parent"] = "s1" },
			refused: "VM 120 has snapshots (the latest is s1); PVE migrates no VM whose local disks have snapshots (non-migratable snapshot exists)"},
		{name: "snapshots deleted when asked", app: func() plan.App { a := withVols("data"); a.DeleteSnapshots = true; return a }(),
			obs: func(o *plan.Observed) { o.VMs["web"][0].Config["parent"] = "s1" }, vols: map[string]plan.VolumeAction{"data": plan.VolMove},
			reason: "its snapshots (the latest is s1) are deleted first (--delete-snapshots)"},
		{name: "a storage the target lacks", app: withVols("data"), obs: func(o *plan.Observed) { o.Storages["pve2"] = map[string][]string{"local": {"images"}} },
			refused: "VM 120 uses storage local-lvm, which node pve2 does not have"},
		{name: "an offline target", app: withVols("data"), obs: func(o *plan.Observed) { o.Offline = []string{"pve2"} },
			refused: "node pve2 is offline; nothing can move there"},
		{name: "moved and replaced at once", app: func() plan.App { a := withVols("data"); a.VM.Image = "local:import/other.qcow2"; return a }(),
			refused: "moving its VM from pve1 to pve2 and replacing it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := vmMoveObs(tc.keepers)
			if tc.obs != nil {
				tc.obs(obs)
			}
			p, err := plan.Make([]plan.App{tc.app}, obs)
			if tc.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("refusal: %v, want %q", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkVMMove(t, onlyChange(t, p), tc.vols, tc.reason)
		})
	}
}

// checkVMMove fails unless c moves VM 120 from pve1 to pve2 with the
// volume actions vols and a reason containing reason.
func checkVMMove(t *testing.T, c plan.Change, vols map[string]plan.VolumeAction, reason string) {
	t.Helper()
	if c.Action != plan.Move || c.From != "pve1" || c.Node != "pve2" || c.OldVMID != 120 || !c.Start || c.Restart {
		t.Fatalf("change = %+v", c)
	}
	got := map[string]plan.VolumeAction{}
	for _, v := range c.Volumes {
		got[v.Name] = v.Action
	}
	if len(got) != len(vols) {
		t.Fatalf("volumes = %v, want %v", got, vols)
	}
	for n, a := range vols {
		if got[n] != a {
			t.Fatalf("volumes = %v, want %v", got, vols)
		}
	}
	if why := strings.Join(c.Reasons, "\n"); !strings.Contains(why, reason) {
		t.Fatalf("reasons:\n%s\nwant %q", why, reason)
	}
}
