package plan_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/plan"
)

func TestVolumeTag_roundTrip(t *testing.T) {
	for _, tc := range []struct {
		name, volid, tag string
	}{
		{"data", "nfs:900/vm-900-disk-1.raw", "corral-vol-data+nfs+900+vm-900-disk-1.raw"},
		{"db-files", "rbd:vm-900-disk-12", "corral-vol-db-files+rbd+vm-900-disk-12"},
		{"x", "ceph_pool.a:vm-1-disk-0", "corral-vol-x+ceph_pool.a+vm-1-disk-0"},
		{"up", "NFS:900/vm-900-disk-1.raw", ""}, // PVE lower-cases tags: not recorded
		{"plus", "nfs:900/vm+900.raw", ""},
		{"none", "novolid", ""},
	} {
		got := plan.VolumeTag(tc.name, tc.volid)
		if got != tc.tag {
			t.Errorf("VolumeTag(%s, %s) = %q, want %q", tc.name, tc.volid, got, tc.tag)
			continue
		}
		if got == "" {
			continue
		}
		back := plan.VolumeTags([]string{"corral", got, "corral-app-a"})
		if !maps.Equal(back, map[string]string{tc.name: tc.volid}) {
			t.Errorf("VolumeTags(%s) = %v", got, back)
		}
	}
}

// offlineShared is three nodes, pve2 offline, with app "notes" on it
// whose container's tags record its volume on nfs (and the volume seen
// from pve1 and pve3).
func offlineShared(volStorage string) (*plan.Observed, plan.App) {
	obs := threeNodes()
	obs.Offline = []string{"pve2"}
	obs.SharedStorages = map[string]bool{"nfs": true}
	volid := "nfs:900/vm-900-disk-1.raw"
	if volStorage != "nfs" {
		volid = volStorage + ":vm-900-disk-1"
	}
	tags := strings.Join([]string{"corral", "corral-app-notes", plan.VolumeTag("data", volid)}, ";")
	obs.Apps["notes"] = []*plan.CT{{VMID: 105, Node: "pve2", Status: "running", Config: map[string]string{"tags": tags}}}
	obs.Volumes = map[string]int64{}
	if volStorage == "nfs" {
		obs.Volumes["pve1/"+volid] = 1 << 30
		obs.Volumes["pve3/"+volid] = 1 << 30
	}
	a := plainApp("notes", 512, plan.Placement{})
	a.Volumes = []plan.Volume{{Name: "data", Storage: volStorage, Size: 1 << 30, Mount: "/srv/data", Reclaim: plan.Retain}}
	return obs, a
}

func TestMake_recoverOffline(t *testing.T) {
	for _, tc := range []struct {
		name     string
		storage  string
		consent  bool
		action   plan.Action
		node     string
		warnings string
	}{
		{"shared, without consent: left alone, says --recover", "nfs", false, plan.NoOp, "pve2", "corral apply --recover can start it on another node"},
		{"shared, --recover: created elsewhere", "nfs", true, plan.Create, "pve1", ""},
		{"local, without consent", "local-lvm", false, plan.NoOp, "pve2", "it cannot be recovered on another node: volume data is on storage local-lvm, which is not shared"},
		{"local, --recover refused", "local-lvm", true, plan.NoOp, "pve2", "app notes: --recover refused: node pve2 is offline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs, a := offlineShared(tc.storage)
			obs.Recover = tc.consent
			p, err := plan.Make([]plan.App{a}, obs)
			if err != nil {
				t.Fatal(err)
			}
			c := p.Changes[0]
			if c.Action != tc.action || c.Node != tc.node {
				t.Fatalf("%s on %s, want %s on %s: %+v", c.Action, c.Node, tc.action, tc.node, c)
			}
			if tc.warnings != "" && !slices.ContainsFunc(p.Warnings, func(w string) bool { return strings.Contains(w, tc.warnings) }) {
				t.Errorf("warnings %q lack %q", p.Warnings, tc.warnings)
			}
			if c.Action != plan.Create {
				return
			}
			if c.Recover == nil || c.Recover.VMID != 105 || c.Recover.Node != "pve2" || c.VMID != 0 {
				t.Errorf("recover %+v, vmid %d", c.Recover, c.VMID)
			}
			if len(c.Volumes) != 1 || c.Volumes[0].Action != plan.VolAttach || c.Volumes[0].VolID != "nfs:900/vm-900-disk-1.raw" {
				t.Errorf("volumes %+v", c.Volumes)
			}
			tags := plan.AppTags(*c.Desired)
			if !slices.Contains(tags, "corral-recovered-105") || !slices.Contains(tags, "corral-vol-data+nfs+900+vm-900-disk-1.raw") {
				t.Errorf("tags of the recovered container %v", tags)
			}
			if !p.HasChanges() || !slices.Contains(p.Nodes(), "pve1") || slices.Contains(p.Nodes(), "pve2") {
				t.Errorf("locks %v", p.Nodes())
			}
		})
	}
}

// TestMake_staleCopyFirst: once the recovered app's old node answers
// again, its old container is planned for removal before any other change,
// and the app's own container is planned against the volume the keeper of
// the returned node records (no "moving between nodes" refusal).
func TestMake_staleCopyFirst(t *testing.T) {
	volid := "nfs:900/vm-900-disk-1.raw"
	obs := threeNodes()
	obs.SharedStorages = map[string]bool{"nfs": true}
	obs.Volumes = map[string]int64{}
	for _, n := range obs.Nodes {
		obs.Volumes[n+"/"+volid] = 1 << 30
	}
	a := plainApp("notes", 512, plan.Placement{})
	a.Volumes = []plan.Volume{{Name: "data", Storage: "nfs", Size: 1 << 30, Mount: "/srv/data", Reclaim: plan.Retain}}
	want := plan.InPlaceConfig(a)
	want["tags"] = strings.Join(plan.AppTags(func() plan.App {
		b := a
		b.Tags = []string{"corral-recovered-105", plan.VolumeTag("data", volid)}
		return b
	}()), ";")
	want["mp0"] = plan.AttachValue(volid, "/srv/data", false)
	want["rootfs"] = "local-lvm:vm-110-disk-0,size=20G"
	want["unprivileged"] = "1"
	obs.Apps["notes"] = []*plan.CT{
		{VMID: 105, Node: "pve2", Status: "running", Config: map[string]string{"tags": "corral;corral-app-notes", "mp0": want["mp0"]}},
		{VMID: 110, Node: "pve1", Status: "running", Config: want},
	}
	obs.Keepers = map[string][]*plan.Keeper{"pve2": {plan.NewKeeper(900, "pve2", map[string]string{
		"mp0": volid + ",mp=/corral/notes/data", "protection": "1",
		"description": plan.KeeperDescription(map[plan.VolumeKey]string{{App: "notes", Name: "data"}: volid})})}}
	plan.SplitStale(obs)
	if len(obs.Apps["notes"]) != 1 || obs.Apps["notes"][0].VMID != 110 || len(obs.Stale) != 1 || obs.Stale[0].CT.VMID != 105 {
		t.Fatalf("SplitStale: apps %v stale %v", obs.Apps["notes"], obs.Stale)
	}
	p, err := plan.Make([]plan.App{a, plainApp("other", 512, plan.Placement{})}, obs)
	if err != nil {
		t.Fatal(err)
	}
	first := p.Changes[0]
	if first.Action != plan.Delete || !first.Stale || first.OldVMID != 105 || first.Node != "pve2" {
		t.Fatalf("first change %+v, want the stale copy's removal", first)
	}
	for _, c := range p.Changes[1:] {
		if c.App == "notes" {
			for _, v := range c.Volumes {
				if v.VolID != volid || v.Action != plan.VolKeep {
					t.Errorf("notes volume %+v, want kept %s", v, volid)
				}
			}
			for _, e := range c.Config {
				if e.Key == "tags" {
					t.Errorf("tags change %q → %q: the recovered tag must stay", e.Old, e.New)
				}
			}
		}
	}
}
