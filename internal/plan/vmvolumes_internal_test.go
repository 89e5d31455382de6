package plan

import (
	"strconv"
	"strings"
	"testing"
)

// TestVMVolumes: each volume of a VM app is created on the keeper VM,
// attached from it, kept or grown where attached, and a disk the
// manifest no longer lists is detached; a shrink, a disk found twice or
// on another node's keeper VM, and a node with two keeper VMs are
// refused; disks that move stop a running VM for the move.
func TestVMVolumes(t *testing.T) {
	const g = 1 << 30
	data, logs := VMVolumeSerial("web", "data"), VMVolumeSerial("web", "logs")
	disk := func(vmid, n int, serial, size string) string {
		return "local-lvm:vm-" + strconv.Itoa(vmid) + "-disk-" + strconv.Itoa(n) + ",serial=" + serial + ",size=" + size
	}
	keeper := func(node string, vmid int, conf map[string]string) *VMKeeper {
		conf["protection"] = "1"
		return &VMKeeper{VMID: vmid, Node: node, Config: conf}
	}
	oldNotes := VMKeeperDescription(map[string]VolumeKey{VMVolumeSerial("web", "old"): {App: "web", Name: "old"}})
	vm := &VM{VMID: 150, Node: "pve", Status: "running", Config: map[string]string{"scsi1": disk(150, 1, data, "1G"), "scsi2": disk(150, 2, VMVolumeSerial("web", "old"), "1G")}}
	for _, tc := range []struct {
		name     string
		vm       *VM
		replaced bool
		keepers  map[string][]*VMKeeper
		size     int64 // of data
		want     string
		refused  string
		restart  bool
		reason   string
	}{
		{name: "new app, no keeper", size: g, want: "data:create logs:create", restart: false},
		{name: "from the keeper", size: g, keepers: map[string][]*VMKeeper{"pve": {keeper("pve", 900, map[string]string{"scsi0": disk(900, 0, data, "1G"), "scsi1": disk(900, 1, logs, "1G")})}},
			want: "data:attach logs:attach"},
		{name: "attached, one gone", vm: vm, size: g, keepers: map[string][]*VMKeeper{"pve": {keeper("pve", 900, map[string]string{"description": oldNotes})}},
			want: "data:keep logs:create old:detach", restart: true},
		{name: "grown in place", vm: &VM{VMID: 150, Node: "pve", Status: "running", Config: map[string]string{"scsi1": disk(150, 1, data, "1G"), "scsi2": disk(150, 2, logs, "1G")}}, size: 2 * g,
			want: "data:grow logs:keep"},
		{name: "keeper unprotected", vm: &VM{VMID: 150, Node: "pve", Status: "running", Config: map[string]string{"scsi1": disk(150, 1, data, "1G"), "scsi2": disk(150, 2, logs, "1G")}}, size: g,
			keepers: map[string][]*VMKeeper{"pve": {{VMID: 900, Node: "pve", Config: map[string]string{}}}}, want: "data:keep logs:keep", reason: "keeper VM 900 on pve has protection off"},
		{name: "replace", vm: vm, replaced: true, size: g, keepers: map[string][]*VMKeeper{"pve": {keeper("pve", 900, map[string]string{"description": oldNotes})}}, want: "data:attach logs:create old:detach"},
		{name: "shrink", vm: vm, size: g / 2, refused: "a disk cannot shrink"},
		{name: "twice", vm: vm, size: g, keepers: map[string][]*VMKeeper{"pve": {keeper("pve", 900, map[string]string{"scsi0": disk(900, 0, data, "1G")})}}, refused: "two disks with its serial"},
		{name: "other node", size: g, keepers: map[string][]*VMKeeper{"pve2": {keeper("pve2", 901, map[string]string{"scsi0": disk(901, 0, logs, "1G")})}}, refused: "held by keeper VM 901 on node pve2"},
		{name: "two keepers", size: g, keepers: map[string][]*VMKeeper{"pve": {keeper("pve", 900, map[string]string{}), keeper("pve", 902, map[string]string{})}}, refused: "node pve has 2 keeper VMs (900, 902)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &App{Name: "web", Kind: KindVM, Volumes: []Volume{{Name: "data", Storage: "local-lvm", Size: tc.size}, {Name: "logs", Storage: "local-lvm", Size: g}}}
			obs := &Observed{VMKeepers: tc.keepers}
			c := Change{App: "web", Kind: KindVM, Node: "pve"}
			probs := vmVolumes(&c, a, tc.vm, tc.replaced, obs)
			if tc.refused != "" {
				if len(probs) == 0 || !strings.Contains(strings.Join(probs, "\n"), tc.refused) {
					t.Fatalf("refusals %q, want one saying %q", probs, tc.refused)
				}
				return
			}
			if len(probs) > 0 {
				t.Fatalf("refused: %q", probs)
			}
			var got []string
			for _, v := range c.Volumes {
				got = append(got, v.Name+":"+string(v.Action))
				if v.Name != "old" && v.Serial != VMVolumeSerial("web", v.Name) {
					t.Errorf("volume %s has serial %q", v.Name, v.Serial)
				}
			}
			if strings.Join(got, " ") != tc.want {
				t.Fatalf("volumes %v, want %s", got, tc.want)
			}
			if !tc.replaced {
				vmVolumeReasons(&c, tc.vm, obs)
				if c.Restart != tc.restart || c.Action != Update && tc.vm != nil {
					t.Fatalf("restart %v action %v, want restart %v and an update; reasons %q", c.Restart, c.Action, tc.restart, c.Reasons)
				}
				if !strings.Contains(strings.Join(c.Reasons, "\n"), tc.reason) {
					t.Errorf("reasons %q, want one saying %q", c.Reasons, tc.reason)
				}
				if len(tc.keepers) == 0 && strings.Contains(tc.want, "create") != strings.Contains(strings.Join(c.Reasons, "\n"), "a keeper VM is created on node pve") {
					t.Errorf("reasons %q say a keeper VM is created when, and only when, a disk is created without one", c.Reasons)
				}
			}
		})
	}
}
