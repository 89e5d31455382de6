package plan_test

import (
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/plan"
)

// ReadCarrier on configs as a kill or a web-UI edit leaves them: every
// volume the carrier holds must be named by exactly one readable
// carrying line; a line whose entry is empty (not moved in yet, or
// handed over already) is normal. A swap of two lines' entries is not
// detectable (docs/moving.md, "Edited carrier Notes").
func TestReadCarrierLines(t *testing.T) {
	const head = "corral carrier\ncorral-move: app=web from=pve1 to=pve2\n"
	const data = "corral-carrying: web/data=local-lvm:vm-100-disk-1>unused0\n"
	const logs = "corral-carrying: web/logs=local-lvm:vm-100-disk-2>unused1\n"
	both := map[string]string{"unused0": "local-lvm:vm-105-disk-1", "unused1": "local-lvm:vm-105-disk-2"}
	for _, tc := range []struct {
		name, notes string
		held        map[string]string
		want        string // in Problem; "" for none
	}{
		{"both held", head + data + logs, both, ""},
		{"nothing moved in yet", head + data + logs, nil, ""},
		{"one moved in", head + data + logs, map[string]string{"unused0": "local-lvm:vm-105-disk-1"}, ""},
		{"one handed over already", head + data + logs, map[string]string{"unused1": "local-lvm:vm-105-disk-2"}, ""},
		{"renamed by the migration", head + data + logs, map[string]string{"unused0": "local-lvm:vm-105-disk-7", "unused1": "local-lvm:vm-105-disk-3"}, ""},
		{"no lines, nothing held", head, nil, ""},
		{"a line deleted", head + data, both, `it holds unused1=local-lvm:vm-105-disk-2, but no corral-carrying line`},
		{"every line deleted", head, both, "it holds unused0=local-lvm:vm-105-disk-1, unused1=local-lvm:vm-105-disk-2, but no corral-carrying line"},
		{"a line's entry edited", head + data + strings.Replace(logs, "unused1", "unused4", 1), both, "it holds unused1=local-lvm:vm-105-disk-2, but no"},
		{"a volume held as a mount point", head + data + logs, map[string]string{"unused0": "local-lvm:vm-105-disk-1", "mp0": "local-lvm:vm-105-disk-2,mp=/x"}, "it holds mp0=local-lvm:vm-105-disk-2"},
		{"a line without its entry", head + data + "corral-carrying: web/logs=local-lvm:vm-100-disk-2\n", both, "carrying lines corral cannot read"},
		{"a line without its volume name", head + data + "corral-carrying: web=local-lvm:vm-100-disk-2>unused1\n", both, "cannot read"},
		{"a line naming a mount point", head + data + strings.Replace(logs, "unused1", "mp1", 1), both, "cannot read"},
		{"a line naming no entry key", head + data + strings.Replace(logs, "unused1", "unused", 1), both, "cannot read"},
		{"a line's marker edited", head + data + strings.Replace(logs, "corral-carrying:", "Corral-Carrying:", 1), both, "cannot read"},
		{"a line truncated", head + data + "corral-carrying:\n", map[string]string{"unused0": "local-lvm:vm-105-disk-1"}, "cannot read"},
		{"a volume named twice", head + data + strings.Replace(data, "unused0", "unused1", 1), both, "cannot read"},
		{"two lines name one entry", head + data + strings.Replace(logs, "unused1", "unused0", 1), both, "web/data and web/logs all name its unused0"},
		{"a volume not named for the carrier", head + data + logs, map[string]string{"unused0": "local-lvm:vm-105-disk-1", "unused1": "local-lvm:vm-100-disk-2"}, "it holds unused1=local-lvm:vm-100-disk-2, not named for CT 105"},
		// Not detectable: nothing PVE shows ties a held volume to its line.
		{"two lines' entries swapped", head + strings.Replace(data, "unused0", "unused1", 1) + strings.Replace(logs, "unused1", "unused0", 1), both, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf := map[string]string{"description": tc.notes, "rootfs": "local-lvm:vm-105-disk-0,size=1G", "protection": "1"}
			for k, v := range tc.held {
				conf[k] = v
			}
			c := plan.ReadCarrier(105, "pve1", plan.ParseTags("corral;corral-carrier;corral-moving-web"), conf)
			if tc.want == "" && c.Problem != "" || tc.want != "" && !strings.Contains(c.Problem, tc.want) {
				t.Fatalf("Problem %q, want %q", c.Problem, tc.want)
			}
			if tc.want != "" {
				ref := c.Refusal("web")
				for _, w := range []string{"carrier CT 105 on pve1", "write back its Notes"} {
					if !strings.Contains(ref, w) {
						t.Errorf("refusal %q lacks %q", ref, w)
					}
				}
			}
		})
	}
}

// What corral writes, it reads back whole: no line is taken for an edit.
func TestCarrierNotesReadBackWhole(t *testing.T) {
	n := plan.CarrierNotes{App: "web", From: "pve1", To: "pve2", Was: []string{"pve3"}, Carrying: map[plan.VolumeKey]plan.AdoptIntent{
		{App: "web", Name: "data"}: {Source: "local-lvm:vm-100-disk-1", Key: "unused0"},
		{App: "web", Name: "logs"}: {Source: "nfs:100/vm-100-disk-2.raw", Key: "unused12"},
	}}
	got, ok := plan.ParseCarrierNotes(n.Render())
	if !ok || len(got.Malformed) > 0 || len(got.Carrying) != 2 || got.Carrying[plan.VolumeKey{App: "web", Name: "logs"}] != n.Carrying[plan.VolumeKey{App: "web", Name: "logs"}] {
		t.Fatalf("parsed %+v (ok %v), want %+v", got, ok, n)
	}
}
