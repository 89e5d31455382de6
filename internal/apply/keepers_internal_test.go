package apply

import (
	"fmt"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/plan"
)

// A keeper's Notes carry a project line per app as well as a record per
// volume: a keeper whose records alone would leave room, but whose
// project lines fill it, must not take another volume (found by `corral
// bench --scale`: 1,000 apps in a project over 5 nodes overfilled the
// first keeper of each node, and PVE refused its description).
func TestForNew_countsProjectLines(t *testing.T) {
	project := strings.Repeat("p", 40)
	full := func(apps int, withProjects bool) *keeper {
		k := &keeper{node: "pve", vmid: 100, records: map[plan.VolumeKey]string{}, projects: map[string]string{}}
		for i := 0; i < apps; i++ {
			app := fmt.Sprintf("app%d", i)
			k.records[plan.VolumeKey{App: app, Name: "data"}] = fmt.Sprintf("local-lvm:vm-100-disk-%d", i)
			if withProjects {
				k.projects[app] = project
			}
		}
		k.volumes = apps
		return k
	}
	for _, tc := range []struct {
		name     string
		first    *keeper
		wantVMID int
	}{
		{"records and project lines fill the first keeper", full(70, true), 101},
		{"the same records without project lines leave room", full(70, false), 100},
		{"an empty keeper", full(0, true), 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			second := &keeper{node: "pve", vmid: 101}
			s := &keeperSet{byNode: map[string][]*keeper{"pve": {tc.first, second}}}
			k, done, err := s.forNew("pve", plan.VolumeKey{App: "new", Name: "data"}, "local-lvm")
			if err != nil {
				t.Fatal(err)
			}
			defer done()
			if k.vmid != tc.wantVMID {
				notes := plan.KeeperNotes{Records: tc.first.records, Projects: tc.first.projects}.Render()
				t.Errorf("forNew picked keeper %d, want %d (first keeper's Notes: %d characters)", k.vmid, tc.wantVMID, len(notes))
			}
		})
	}
}
