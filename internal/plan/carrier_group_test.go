package plan_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/plan"
)

// GroupCarriers: one move per app; an app's empty extra carriers are
// leftovers whatever their VMIDs; two that hold volumes, and carriers
// whose Notes were edited, are carriers corral cannot finish.
func TestGroupCarriers(t *testing.T) {
	notes := func(app string, carrying ...string) string {
		n := plan.CarrierNotes{App: app, From: "pve1", To: "pve2", Carrying: map[plan.VolumeKey]plan.AdoptIntent{}}
		for _, c := range carrying {
			a, name, _ := strings.Cut(c, "/")
			n.Carrying[plan.VolumeKey{App: a, Name: name}] = plan.AdoptIntent{Source: "local-lvm:vm-100-disk-1", Key: "unused0"}
		}
		return n.Render()
	}
	car := func(vmid int, tags, desc string, vols ...string) *plan.Carrier {
		conf := map[string]string{"description": desc, "rootfs": "local-lvm:vm-1-disk-0"}
		for i, v := range vols {
			conf["unused"+string(rune('0'+i))] = v
		}
		return plan.ReadCarrier(vmid, "pve1", plan.ParseTags(tags), conf)
	}
	const tagged, old = "corral;corral-carrier;corral-moving-web", "corral;corral-carrier"
	for _, tc := range []struct {
		name            string
		cars            []*plan.Carrier
		move            int // web's move, 0 for none
		leftover, bad   []int
		problemContains string
	}{
		{"one", []*plan.Carrier{car(105, tagged, notes("web", "web/data"), "local-lvm:vm-105-disk-1")}, 105, nil, nil, ""},
		{"empty one first", []*plan.Carrier{car(103, tagged, notes("web")), car(105, tagged, notes("web", "web/data"), "local-lvm:vm-105-disk-1")}, 105, []int{103}, nil, ""},
		{"empty one last", []*plan.Carrier{car(105, tagged, notes("web", "web/data")), car(107, old, notes("web"))}, 105, []int{107}, nil, ""},
		{"both empty: the lowest", []*plan.Carrier{car(107, tagged, notes("web")), car(103, tagged, notes("web"))}, 103, []int{107}, nil, ""},
		{"a volume is not empty", []*plan.Carrier{car(103, tagged, notes("web", "web/logs"), "local-lvm:vm-103-disk-1"), car(105, tagged, notes("web", "web/data"))}, 0, nil, []int{103, 105}, "2 carriers holding"},
		// Refused for itself (web too: it names web), whatever the other.
		{"a volume but no line", []*plan.Carrier{car(103, tagged, notes("web"), "local-lvm:vm-103-disk-1"), car(105, tagged, notes("web", "web/data"))}, 105, nil, []int{103}, "no corral-carrying line"},
		{"notes edited", []*plan.Carrier{car(103, tagged, "hello")}, 0, nil, []int{103}, "no longer name a move"},
		{"notes name another app than the tag", []*plan.Carrier{car(103, tagged, notes("db"))}, 0, nil, []int{103}, "its tag names app web"},
		{"notes name another app than the lines", []*plan.Carrier{car(103, old, notes("db", "web/data"))}, 0, nil, []int{103}, "carry volumes of web"},
		{"another app's", []*plan.Carrier{car(103, "corral;corral-carrier;corral-moving-db", notes("db", "db/x"))}, 0, nil, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			moves, left, bad := plan.GroupCarriers(tc.cars)
			got := 0
			if m := moves["web"]; m != nil {
				got = m.VMID
			}
			ids := func(cs []*plan.Carrier) []int {
				var out []int
				for _, c := range cs {
					out = append(out, c.VMID)
				}
				slices.Sort(out)
				return out
			}
			if got != tc.move || !slices.Equal(ids(left), tc.leftover) || !slices.Equal(ids(bad), tc.bad) {
				t.Fatalf("move %d leftovers %v bad %v, want %d %v %v", got, ids(left), ids(bad), tc.move, tc.leftover, tc.bad)
			}
			for _, c := range bad {
				if !strings.Contains(c.Problem, tc.problemContains) || !slices.Contains(c.Apps(), "web") {
					t.Errorf("carrier %d: problem %q apps %v", c.VMID, c.Problem, c.Apps())
				}
			}
		})
	}
}
