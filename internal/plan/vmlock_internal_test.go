package plan

import (
	"strings"
	"testing"
)

// TestVMLockReasons: a plan that changes VM apps on a node without a
// keeper CT says once, on the node's first changing VM app, that apply
// creates a keeper container there for corral's lock and from which
// template (or that the node needs one); not on a node with a keeper CT,
// nor where the plan changes a container, nor for an unchanged VM app.
func TestVMLockReasons(t *testing.T) {
	tmpl := "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst"
	vm := func(app, node string, a Action) Change { return Change{App: app, Kind: KindVM, Node: node, Action: a} }
	for _, tc := range []struct {
		name    string
		changes []Change
		obs     Observed
		want    map[string]string // app → a piece of its lock reason ("" none)
	}{
		{name: "template known", changes: []Change{vm("web", "pve", Create), vm("db", "pve", Create)},
			obs:  Observed{Templates: map[string][]string{"pve": {tmpl}}},
			want: map[string]string{"web": "from container template " + tmpl, "db": ""}},
		{name: "no template", changes: []Change{vm("web", "pve", Update)},
			obs:  Observed{Templates: map[string][]string{}},
			want: map[string]string{"web": "the node has none: apply stops before any change; download one first (pveam download local " + keeperTemplateHint}},
		{name: "templates unread", changes: []Change{vm("web", "pve", Delete)}, obs: Observed{SetupDeferred: true},
			want: map[string]string{"web": "from the first container template the node has"}},
		{name: "keeper CT there", changes: []Change{vm("web", "pve", Create)},
			obs:  Observed{Keepers: map[string][]*Keeper{"pve": {{VMID: 100}}}},
			want: map[string]string{"web": ""}},
		{name: "a container changes", changes: []Change{vm("web", "pve", Create), {App: "notes", Node: "pve", Action: Create}},
			want: map[string]string{"web": "", "notes": ""}},
		{name: "unchanged, other node", changes: []Change{vm("web", "pve", NoOp), vm("db", "pve2", Create)},
			want: map[string]string{"web": "", "db": "node pve2 has no keeper container"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &Plan{Changes: tc.changes}
			vmLockReasons(p, &tc.obs)
			for _, c := range p.Changes {
				got := strings.Join(c.Reasons, "\n")
				if w := tc.want[c.App]; w == "" && got != "" || w != "" && !strings.Contains(got, w) {
					t.Errorf("app %s: reasons %q, want %q", c.App, got, w)
				}
			}
		})
	}
}
