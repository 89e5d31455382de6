package plan_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/plan"
)

// freeObs is projectObs with, in the keeper: hermes's home (declared,
// mounted by ct 105), hermes's home-replaced-… (left by restore
// --replace), old's data (a removed app of shop, its ct gone), blog's
// posts (project other), legacy's files (no project line, app not in the
// manifest) and an unrecorded unused2.
func freeObs() (plan.App, *plan.Observed) {
	a, obs := projectObs()
	delete(obs.Apps, "old")
	k := obs.Keepers["pve"][0]
	add := func(vk plan.VolumeKey, volid, unused string) {
		k.Records[vk] = volid
		k.Config[unused] = volid
		obs.Volumes["pve/"+volid] = 1 << 30
	}
	add(plan.VolumeKey{App: "hermes", Name: "home-replaced-20260101-000000"}, "local-lvm:vm-999-disk-3", "unused3")
	add(plan.VolumeKey{App: "blog", Name: "posts"}, "local-lvm:vm-999-disk-4", "unused4")
	add(plan.VolumeKey{App: "legacy", Name: "files"}, "local-lvm:vm-999-disk-5", "unused5")
	k.Config["unused6"] = "local-lvm:vm-999-disk-6"
	k.Projects["blog"] = "other"
	return a, obs
}

// refsOf is what NodeReferences gives for freeObs: ct 105 mounts home.
var refsOf = map[string][]string{"pve/local-lvm:vm-999-disk-1": {"CT 105 (hermes) mp0"}}

func TestPrune(t *testing.T) {
	a, obs := freeObs()
	p, err := plan.Prune("shop", []plan.App{a}, obs, refsOf)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, v := range p.Volumes {
		got[v.VolID] = v.Reason
	}
	want := map[string]string{
		"local-lvm:vm-999-disk-2": "app old is not in the manifest",
		"local-lvm:vm-999-disk-3": "left by restore --replace",
	}
	if len(got) != len(want) {
		t.Fatalf("pruned %v, want %v", got, want)
	}
	for volid, r := range want {
		if got[volid] != r {
			t.Errorf("%s: reason %q, want %q", volid, got[volid], r)
		}
	}
	w := strings.Join(p.Warnings, "\n")
	for _, s := range []string{"volume legacy/files (local-lvm:vm-999-disk-5) has no project", "holds local-lvm:vm-999-disk-6 recorded for no app"} {
		if !strings.Contains(w, s) {
			t.Errorf("warnings lack %q:\n%s", s, w)
		}
	}

	// A removed app's container still mounting its volume refuses the prune.
	_, err = plan.Prune("shop", []plan.App{a}, obs, map[string][]string{"pve/local-lvm:vm-999-disk-2": {"CT 110 (old) mp0"}})
	var refused *plan.RefusedError
	if !errors.As(err, &refused) || !strings.Contains(err.Error(), "volume old/data (local-lvm:vm-999-disk-2) is referenced by CT 110 (old) mp0") {
		t.Errorf("err = %v", err)
	}
}

func TestFreeVolumes(t *testing.T) {
	a, obs := freeObs()
	p, err := plan.FreeVolumes("shop", []plan.App{a}, obs, []string{"local-lvm:vm-999-disk-2", "local-lvm:vm-999-disk-6", "local-lvm:vm-999-disk-5"}, refsOf)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(p.VolIDs(), " "); got != "local-lvm:vm-999-disk-2 local-lvm:vm-999-disk-6 local-lvm:vm-999-disk-5" {
		t.Errorf("freed %s", got)
	}
	if v := p.Volumes[0]; v.App != "old" || v.Name != "data" || v.Keeper != 999 || v.Project != "shop" || v.Size != 1<<30 {
		t.Errorf("first = %+v", v)
	}
	for _, tt := range []struct{ volid, want string }{
		{"local-lvm:vm-999-disk-1", "local-lvm:vm-999-disk-1 is referenced by CT 105 (hermes) mp0"},
		{"local-lvm:vm-999-disk-4", "local-lvm:vm-999-disk-4 is volume blog/posts of project other"},
		{"local-lvm:vm-105-disk-0", "local-lvm:vm-105-disk-0 is not a volume corral keeps"},
		{"nosuch:thing", "nosuch:thing is not a volume corral keeps"},
	} {
		_, err := plan.FreeVolumes("shop", []plan.App{a}, obs, []string{"local-lvm:vm-999-disk-2", tt.volid}, refsOf)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("rm %s: err = %v, want %q", tt.volid, err, tt.want)
		}
	}
	// Declared and detached (the app's container is gone): refused too.
	delete(obs.Apps, "hermes")
	_, err = plan.FreeVolumes("shop", []plan.App{a}, obs, []string{"local-lvm:vm-999-disk-1"}, nil)
	if err == nil || !strings.Contains(err.Error(), "which app hermes declares in the manifest") {
		t.Errorf("rm of a declared volume: %v", err)
	}
}

// TestFreeVolumesRecordedTwice: of a declared volume two keepers record
// (issue 26), one copy may be freed, never both.
func TestFreeVolumesRecordedTwice(t *testing.T) {
	a, obs := freeObs()
	delete(obs.Apps, "hermes")
	k2 := plan.NewKeeper(998, "pve2", map[string]string{"protection": "1"})
	k2.Records = map[plan.VolumeKey]string{{App: "hermes", Name: "home"}: "local-lvm:vm-998-disk-1"}
	obs.Keepers["pve2"] = []*plan.Keeper{k2}
	obs.Volumes["pve2/local-lvm:vm-998-disk-1"] = 1 << 30
	p, err := plan.FreeVolumes("shop", []plan.App{a}, obs, []string{"local-lvm:vm-998-disk-1"}, nil)
	if err != nil || len(p.Volumes) != 1 || !strings.Contains(p.Volumes[0].Reason, "keeper ct 999 on node pve (local-lvm:vm-999-disk-1) keeps the other copy") {
		t.Fatalf("rm of one of two copies: %+v, %v", p, err)
	}
	_, err = plan.FreeVolumes("shop", []plan.App{a}, obs, []string{"local-lvm:vm-998-disk-1", "local-lvm:vm-999-disk-1"}, nil)
	if err == nil || !strings.Contains(err.Error(), "which app hermes declares in the manifest") {
		t.Errorf("rm of both copies: %v", err)
	}
}

// A volume of an app whose restore was interrupted is never freed: the
// restore, finished later, may need it.
func TestPruneSparesAnInterruptedRestore(t *testing.T) {
	vk := plan.VolumeKey{App: "a1", Name: "data-restored-20260101-000000"}
	conf := map[string]string{"mp0": "local-lvm:vm-900-disk-3,mp=/corral/a1/data-restored-20260101-000000", "protection": "1"}
	obs := &plan.Observed{Nodes: []string{"pve"}, Keepers: map[string][]*plan.Keeper{"pve": {plan.NewKeeper(900, "pve", conf)}},
		Volumes: map[string]int64{"pve/local-lvm:vm-900-disk-3": 1 << 30}, Apps: map[string][]*plan.CT{},
		Restores: map[string]*plan.Restore{"a1": {App: "a1", New: &plan.CT{VMID: 105, Node: "pve"}, Stamp: "20260101-000000"}}}
	apps := []plan.App{{Name: "a1", Project: "demo", Volumes: []plan.Volume{{Name: "data", Mount: "/srv/data"}}}}
	p, err := plan.Prune("demo", apps, obs, nil)
	if err != nil || len(p.Volumes) != 0 || len(p.Warnings) == 0 {
		t.Fatalf("prune during an interrupted restore of %s: %+v %v", vk, p, err)
	}
	if _, err := plan.FreeVolumes("demo", apps, obs, []string{"local-lvm:vm-900-disk-3"}, nil); err == nil {
		t.Fatalf("volumes rm of a volume of an interrupted restore was not refused")
	}
}
