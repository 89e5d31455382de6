package ui

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/testenv"
)

const goldenTemplate = "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst"

// goldenApp is a new app with one retained volume.
func goldenApp(name string, mem int) plan.App {
	return plan.App{Name: name, Project: "demo", Template: goldenTemplate, Unprivileged: true, Cores: 1, MemoryMiB: mem, SwapMiB: 512,
		RootStorage: "local-lvm", RootSize: 8 << 30, Bridge: "vmbr0", IP: "dhcp",
		Volumes: []plan.Volume{{Name: "data", Storage: "local-lvm", Size: 1 << 30, Mount: "/srv/data", Backup: true, Reclaim: plan.Retain}}}
}

// goldenPlan is a plan made by the planner over a two-node cluster: a new
// app placed by policy with a new volume and a keeper to create, an
// existing app whose memory changes, and an app removed from the manifest.
func goldenPlan(t *testing.T) *plan.Plan {
	db := goldenApp("db", 512)
	db.Volumes = nil
	conf := plan.InPlaceConfig(db)
	conf["net0"] = "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:00:00:01,ip=dhcp,type=veth"
	conf["rootfs"] = "local-lvm:vm-101-disk-0,size=8G"
	conf["unprivileged"] = "1"
	delete(conf, "nameserver")
	obs := &plan.Observed{
		Nodes:     []string{"pve1", "pve2"},
		Templates: map[string][]string{"pve1": {goldenTemplate}, "pve2": {goldenTemplate}},
		Apps: map[string][]*plan.CT{
			"db":  {{VMID: 101, Node: "pve1", Project: "demo", Status: "running", Config: conf}},
			"old": {{VMID: 102, Node: "pve1", Project: "demo", Status: "running", Config: map[string]string{"memory": "256"}}},
		},
		Volumes: map[string]int64{},
	}
	db.MemoryMiB = 1024
	p, err := plan.Make([]plan.App{db, goldenApp("web", 256)}, obs)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPlanGolden pins the plan as users and scripts read it, text and
// JSON, from a plan the planner made (issue 17).
func TestPlanGolden(t *testing.T) {
	pj := NewPlanJSON(goldenPlan(t), nil)
	var text bytes.Buffer
	WritePlanText(&text, pj)
	testenv.Golden(t, filepath.Join("testdata", "plan.txt"), text.Bytes())
	var js bytes.Buffer
	if err := WritePlanJSON(&js, pj); err != nil {
		t.Fatal(err)
	}
	testenv.Golden(t, filepath.Join("testdata", "plan.json"), js.Bytes())
}

// TestStatusGolden: corral status's text, every kind of row (a running
// container, a locked one, an app not created), reasons, keeper problems
// and the volumes table.
func TestStatusGolden(t *testing.T) {
	r := &apply.StatusReport{
		Apps: []apply.AppStatus{
			{App: "web", Drift: "no-op", Health: "unhealthy", HealthDetail: `check "http": HTTP status 502, want 200`, Containers: []apply.CTStatus{{VMID: 101, Node: "pve1", Status: "running", IP: "10.0.0.5"}},
				Volumes: []plan.VolumeInfo{{App: "web", Name: "data", VolID: "local-lvm:vm-900-disk-1", Node: "pve1", Size: 3584 << 20, Holder: "ct 101", Mount: "/srv/data", Project: "demo"}}},
			{App: "db", Drift: "update", Health: "unknown", HealthDetail: "ct 102 is stopped", Reasons: []string{"memory changes"}, Containers: []apply.CTStatus{{VMID: 102, Node: "pve2", Status: "stopped", Lock: "backup"}},
				Volumes: []plan.VolumeInfo{{App: "db", Name: "pg", VolID: "local-lvm:vm-900-disk-2", Node: "pve2", Holder: "keeper", Missing: true}}},
			{App: "new", Drift: "create", Reasons: []string{"no container for this app"}},
		},
		Keepers:      []apply.KeeperStatus{{VMID: 900, Node: "pve1", Problems: []string{"protection is off (corral apply repairs it)"}, Lock: "apply by ops@host until 2026-01-02T03:04:05Z"}},
		GuestUnknown: map[string][]string{"db": {"secret:pg"}},
	}
	var b bytes.Buffer
	WriteStatus(&b, r)
	testenv.Golden(t, filepath.Join("testdata", "status.txt"), b.Bytes())
}

// TestPlanGolden_targeted pins a plan narrowed to named apps (corral plan
// APP…), text and JSON: what it left out is said in both, and a named app
// without changes says so rather than that the cluster matches.
func TestPlanGolden_targeted(t *testing.T) {
	for _, tc := range []struct{ name, app string }{{"plan_target_web", "web"}, {"plan_target_nochange", "old"}} {
		t.Run(tc.name, func(t *testing.T) {
			p := goldenPlan(t)
			if tc.app == "old" {
				p.Changes[len(p.Changes)-1].Action = plan.NoOp // as once destroyed
			}
			if err := plan.Target(p, &plan.Observed{}, []string{tc.app}); err != nil {
				t.Fatal(err)
			}
			pj := NewPlanJSON(p, nil)
			var text bytes.Buffer
			WritePlanText(&text, pj)
			testenv.Golden(t, filepath.Join("testdata", tc.name+".txt"), text.Bytes())
			var js bytes.Buffer
			if err := WritePlanJSON(&js, pj); err != nil {
				t.Fatal(err)
			}
			testenv.Golden(t, filepath.Join("testdata", tc.name+".json"), js.Bytes())
		})
	}
}
