package apply

import (
	"slices"
	"testing"

	"github.com/corralhq/corral/internal/plan"
)

// Moves are ordered round robin over the keepers their volumes leave, so
// that a drain keeps every keeper of the node busy; other changes go
// first, and each keeper's moves keep the plan's order.
func TestInterleaveMoves(t *testing.T) {
	move := func(app, volid string) plan.Change {
		c := plan.Change{App: app, Action: plan.Move, From: "pve1", Node: "pve2"}
		if volid != "" {
			c.Volumes = []plan.VolumeChange{{Action: plan.VolMove, VolID: volid}}
		}
		return c
	}
	for _, tc := range []struct {
		name    string
		changes []plan.Change
		want    []string
	}{
		{"one keeper keeps the order", []plan.Change{move("a", "local-lvm:vm-100-disk-0"), move("b", "local-lvm:vm-100-disk-1")}, []string{"a", "b"}},
		{"two keepers alternate", []plan.Change{
			move("a", "local-lvm:vm-100-disk-0"), move("b", "local-lvm:vm-100-disk-1"), move("c", "local-lvm:vm-100-disk-2"),
			move("d", "local-lvm:vm-101-disk-0"), move("e", "local-lvm:vm-101-disk-1"),
		}, []string{"a", "d", "b", "e", "c"}},
		{"other changes first, moves without volumes a group of their own", []plan.Change{
			move("a", "local-lvm:vm-100-disk-0"), {App: "x", Action: plan.Update}, move("b", "local-lvm:vm-100-disk-1"), move("n", ""),
		}, []string{"x", "a", "n", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, c := range interleaveMoves(tc.changes) {
				got = append(got, c.App)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("order = %v, want %v", got, tc.want)
			}
		})
	}
}
