package plan

import (
	"strings"
	"testing"
)

// TestVMRestoreNotes: a restored VM's Notes carry the restore's stamp and
// its disks' records while it is in flight, which the keeper VM's reader
// parses, and lose exactly those lines when it becomes the app's.
func TestVMRestoreNotes(t *testing.T) {
	app := "user notes\n\n" + markerHeader + "\n" + markerApp + "web\n"
	records := map[string]VolumeKey{"crl-1": {App: "web", Name: "data"}, "crl-2": {App: "web", Name: "logs"}}
	desc := app + RestoreMarker("20261129-101500") + VMVolumeLines(records)
	if got := ParseRestoreMarker(desc); got != "20261129-101500" {
		t.Errorf("stamp %q", got)
	}
	if got := ParseVMKeeperNotes(desc); len(got) != 2 || got["crl-1"] != records["crl-1"] || got["crl-2"] != records["crl-2"] {
		t.Errorf("records %v", got)
	}
	if got := WithoutVMVolumeLines(desc); got != app {
		t.Errorf("the app's Notes:\n%q\nwant\n%q", got, app)
	}
}

// TestVMRestoreRollback: an interrupted VM restore is rolled back only
// while the app still has its own VM, or without its stamp.
func TestVMRestoreRollback(t *testing.T) {
	vm := &VM{VMID: 105, Node: "pve"}
	cases := []struct {
		name  string
		r     VMRestore
		vms   map[string][]*VM
		back  bool
		words string
	}{
		{"the app keeps its VM", VMRestore{App: "web", New: vm, Stamp: "s"}, map[string][]*VM{"web": {{VMID: 101}}}, true, "keeps VM 101"},
		{"no stamp", VMRestore{App: "web", New: vm}, nil, true, "no VM until"},
		{"set aside", VMRestore{App: "web", New: vm, Replaced: &VM{VMID: 101, Node: "pve"}, Stamp: "s"}, nil, false, "becomes the app's"},
		{"as the app", VMRestore{App: "web", New: vm, Stamp: "s"}, nil, false, "becomes the app's"},
		{"only the replaced", VMRestore{App: "web", Replaced: &VM{VMID: 101, Node: "pve"}}, nil, false, "replaced VM 101"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := &Observed{VMs: tc.vms}
			if got := tc.r.Rollback(o); got != tc.back {
				t.Errorf("Rollback = %v, want %v", got, tc.back)
			}
			if s := tc.r.String(o); !strings.Contains(s, tc.words) {
				t.Errorf("String = %q, want %q in it", s, tc.words)
			}
		})
	}
}
