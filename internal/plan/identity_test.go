package plan

import (
	"strings"
	"testing"
)

func TestReadDamaged(t *testing.T) {
	rec := map[VolumeKey]string{{"alpha", "data"}: "local-lvm:vm-100-disk-1"}
	keeper := map[string]string{
		"description": KeeperDescription(rec),
		"mp0":         "local-lvm:vm-100-disk-1,mp=/corral/alpha/data",
		"protection":  "1",
	}
	carrier := map[string]string{
		"description": CarrierNotes{App: "alpha", From: "pve1", To: "pve2",
			Carrying: map[VolumeKey]AdoptIntent{{"alpha", "data"}: {Source: "local-lvm:vm-100-disk-1", Key: "unused0"}}}.Render(),
		"unused0": "local-lvm:vm-300-disk-1",
	}
	for _, tc := range []struct {
		name     string
		ctName   string
		tags     []string
		conf     map[string]string
		wantKind string // "" = not damaged
		wantApps string
	}{
		{"healthy keeper", KeeperName, []string{TagManaged, TagKeeper}, keeper, "", ""},
		{"keeper tag removed", KeeperName, []string{TagManaged}, keeper, "keeper", "alpha"},
		{"every tag removed, renamed", "pet", nil, keeper, "keeper", "alpha"},
		{"only the mount point is left", "x", nil, map[string]string{"mp0": "local-lvm:vm-100-disk-1,mp=/corral/alpha/data"}, "keeper", "alpha"},
		{"only a Notes line names an unused volume", "x", nil, map[string]string{"description": KeeperDescription(rec), "unused0": "local-lvm:vm-100-disk-1"}, "keeper", "alpha"},
		{"a keeper's empty shell", KeeperName, []string{TagManaged}, map[string]string{"description": KeeperDescription(nil)}, "", ""},
		{"a stranger named like a keeper", KeeperName, nil, map[string]string{"mp0": "local-lvm:vm-101-disk-1,mp=/srv"}, "", ""},
		{"an app with a mount under /corral", "web", nil, map[string]string{"description": AppDescription(App{Name: "web", Template: "t"}), "mp0": "local-lvm:vm-100-disk-1,mp=/corral/web/data"}, "", ""},
		{"carrier tag removed", CarrierName, []string{TagManaged, TagMovingPrefix + "alpha"}, carrier, "carrier", "alpha"},
		{"healthy carrier", CarrierName, []string{TagManaged, TagCarrier}, carrier, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := ReadDamaged(100, "pve1", tc.ctName, tc.tags, tc.conf)
			if tc.wantKind == "" {
				if d != nil {
					t.Fatalf("damaged %s, want not damaged: %s", d.Kind, d.Problem())
				}
				return
			}
			if d == nil || d.Kind != tc.wantKind || strings.Join(d.Apps(), ",") != tc.wantApps {
				t.Fatalf("got %+v, want a damaged %s holding %s's data", d, tc.wantKind, tc.wantApps)
			}
			p := d.Problem()
			if !strings.Contains(p, "CT 100 on pve1") || !strings.Contains(p, "pct set 100 --tags '"+d.WantTags()+"'") || !strings.Contains(p, "alpha/data") {
				t.Errorf("problem does not name the CT, the fix and the data: %s", p)
			}
		})
	}
}

// A damaged keeper refuses the apps whose data it holds, and every new
// keeper or volume on its node; apps elsewhere, or without volumes,
// plan as usual. No refused app's change stays in the plan.
func TestMake_damagedKeeperRefuses(t *testing.T) {
	obs := &Observed{
		Nodes:    []string{"pve1", "pve2"},
		Apps:     map[string][]*CT{},
		Keepers:  map[string][]*Keeper{},
		Volumes:  map[string]int64{},
		Storages: map[string]map[string][]string{},
		Damaged: []*Damaged{{Kind: "keeper", VMID: 100, Node: "pve1",
			Records: map[VolumeKey]string{{"alpha", "data"}: "local-lvm:vm-100-disk-1"}}},
	}
	vol := []Volume{{Name: "data", Size: 1 << 30, Mount: "/srv", Storage: "local-lvm", Reclaim: Retain}}
	apps := []App{
		{Name: "alpha", Node: "pve1", Template: "local:vztmpl/t.tar.zst", Volumes: vol},
		{Name: "beta", Node: "pve1", Template: "local:vztmpl/t.tar.zst", Volumes: vol},
		{Name: "gamma", Node: "pve1", Template: "local:vztmpl/t.tar.zst"},
		{Name: "delta", Node: "pve2", Template: "local:vztmpl/t.tar.zst", Volumes: vol},
	}
	p, err := Make(apps, obs)
	refused, ok := err.(*RefusedError)
	if !ok {
		t.Fatalf("err = %v, want a refusal", err)
	}
	text := strings.Join(refused.Problems, "\n")
	if !strings.Contains(text, "keeper CT 100 on pve1 is damaged") || !strings.Contains(text, "app beta: it needs a new volume on node pve1") {
		t.Errorf("refusals:\n%s", text)
	}
	var planned []string
	for _, c := range p.Changes {
		planned = append(planned, c.App)
	}
	for _, k := range p.Keepers {
		if k.Node == "pve1" && k.Action == Create {
			t.Errorf("a keeper is planned on pve1 beside the damaged one")
		}
	}
	if got := strings.Join(planned, ","); got != "gamma,delta" {
		t.Errorf("planned changes for %s, want gamma,delta (alpha and beta refused)", got)
	}
}

// TestKeeperRepair_leavesADamagedCarriersAdoptions (found by the two-node
// soak): a keeper's intent to adopt a volume of a carrier whose kind tag
// was edited is neither forgotten nor finished while the carrier is
// damaged; another of its intents still is.
func TestKeeperRepair_leavesADamagedCarriersAdoptions(t *testing.T) {
	k := &Keeper{VMID: 100, Node: "pve1", Protected: true, Config: map[string]string{}, Records: map[VolumeKey]string{},
		Intents: map[VolumeKey]AdoptIntent{
			{App: "a1", Name: "data"}:  {Source: "local-lvm:vm-105-disk-1", Key: "unused0"},
			{App: "b1", Name: "cache"}: {Source: "local-lvm:vm-150-disk-1", Key: "unused1"},
		}}
	k.Config["description"] = KeeperDescriptionWith(k.Records, k.Intents)
	obs := &Observed{Volumes: map[string]int64{"pve1/local-lvm:vm-105-disk-1": 1, "pve1/local-lvm:vm-150-disk-1": 1},
		Damaged: []*Damaged{{Kind: "carrier", VMID: 105, Node: "pve1", App: "a1"}}}
	kc := keeperRepair(k, obs)
	if kc == nil || len(kc.DropIntents) != 1 || kc.DropIntents[0] != (VolumeKey{App: "b1", Name: "cache"}) {
		t.Fatalf("repair %+v: want only b1/cache's intent forgotten, a1/data's (of damaged carrier 105) left", kc)
	}
}

// TestMake_damagedKeeperOfAnAdoptedVolume (found by the two-node soak):
// the keeper holding an app's adopted volume is damaged, so the adoption
// looks undone and its source is gone. The plan refuses naming the
// damaged keeper, once, and not with the misleading "does not exist" of
// the adoption that did happen.
func TestMake_damagedKeeperOfAnAdoptedVolume(t *testing.T) {
	obs := &Observed{
		Nodes:    []string{"pve1"},
		Apps:     map[string][]*CT{},
		Keepers:  map[string][]*Keeper{},
		Volumes:  map[string]int64{},
		Storages: map[string]map[string][]string{},
		Damaged: []*Damaged{{Kind: "keeper", VMID: 100, Node: "pve1",
			Records: map[VolumeKey]string{{"c1", "data"}: "local-lvm:vm-100-disk-1", {"c1", "legacy"}: "local-lvm:vm-100-disk-2"}}},
	}
	apps := []App{{Name: "c1", Node: "pve1", Template: "local:vztmpl/t.tar.zst", Volumes: []Volume{
		{Name: "data", Size: 1 << 30, Mount: "/srv/data", Storage: "local-lvm", Reclaim: Retain},
		{Name: "legacy", Mount: "/srv/legacy", Storage: "local-lvm", Reclaim: Retain, Adopt: "local-lvm:vm-150-disk-1"},
	}}}
	_, err := Make(apps, obs)
	refused, ok := err.(*RefusedError)
	if !ok {
		t.Fatalf("err = %v, want a refusal", err)
	}
	if len(refused.Problems) != 1 || !strings.Contains(refused.Problems[0], "keeper CT 100 on pve1 is damaged") {
		t.Errorf("refusals, want only the damaged keeper's:\n%s", strings.Join(refused.Problems, "\n"))
	}
}
