package ui

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
)

func TestWriteTimingsSumsPerAppAndPhaseInFirstOrder(t *testing.T) {
	var b bytes.Buffer
	WriteTimings(&b, []apply.Timing{
		{App: "notes", Phase: "create", Elapsed: time.Second},
		{App: "notes", Phase: "attach", Elapsed: 100 * time.Millisecond},
		{App: "wiki", Phase: "create", Elapsed: 2 * time.Second},
		{App: "notes", Phase: "attach", Elapsed: 200 * time.Millisecond},
	}, 4*time.Second)
	var rows []string
	for _, line := range strings.Split(b.String(), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] != "APP" {
			rows = append(rows, strings.Join(f, " "))
		}
	}
	want := []string{"notes create 1s", "notes attach 300ms", "wiki create 2s"}
	if strings.Join(rows, "|") != strings.Join(want, "|") {
		t.Errorf("rows %q, want %q\n%s", rows, want, b.String())
	}
	if !strings.Contains(b.String(), "TOTAL") || !strings.Contains(b.String(), "4s") {
		t.Errorf("no total line:\n%s", b.String())
	}
	b.Reset()
	WriteTimings(&b, nil, time.Second)
	if b.Len() != 0 {
		t.Errorf("no timings printed %q", b.String())
	}
}

func TestWritePlanText(t *testing.T) {
	pj := PlanJSON{HasChanges: true, Summary: map[string]int{"create": 1, "update": 1},
		Keepers: []KeeperJSON{{Node: "pve", Action: "create", Reasons: []string{"no keeper on pve"}}},
		Changes: []ChangeJSON{
			{App: "notes", Node: "pve", Action: "create", Volumes: []VolumeJSON{{Name: "data", Action: "create", Size: 1 << 30, Mount: "/srv/data"}}},
			{App: "wiki", Node: "pve", VMID: 101, Action: "update", Config: []EditJSON{{Key: "memory", Old: "256", New: "512"}, {Key: "description", Old: "", New: "a\nb"}}},
			{App: "old", Node: "pve", VMID: 102, Action: "no-op"},
		},
		Warnings: []string{"ct 200 is not corral's"}}
	var b bytes.Buffer
	WritePlanText(&b, pj)
	for _, want := range []string{
		"+ keeper on pve\n      # no keeper on pve\n",
		"+ app notes (create on pve)\n      volume data: create (1 GiB, at /srv/data)\n",
		"~ app wiki (update ct 101 on pve)\n      ~ memory: 256 → 512\n      ~ description: (unset) → \"a\\nb\"\n",
		"  app old (ct 102 on pve): no changes\n",
		"! warning: ct 200 is not corral's\n",
		"Plan: 1 to create, 1 to update, 1 keeper(s) to create or repair.",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("plan text lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	WritePlanText(&b, PlanJSON{})
	if !strings.Contains(b.String(), "No changes.") {
		t.Errorf("empty plan: %q", b.String())
	}
}

func TestJSONEventsStepEnd(t *testing.T) {
	var b bytes.Buffer
	j := &JSONEvents{W: &b}
	j.Step("notes", "create", "ct on pve")(errors.New("boom"))
	j.Step("notes", "start", "ct 100")(nil)
	var evs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		evs = append(evs, ev)
	}
	if len(evs) != 4 || evs[0]["type"] != "step_start" || evs[0]["detail"] != "ct on pve" || evs[1]["type"] != "step_end" || evs[1]["error"] != "boom" {
		t.Fatalf("events %v", evs)
	}
	if _, ok := evs[3]["error"]; ok || evs[3]["phase"] != "start" {
		t.Errorf("a step that succeeded: %v", evs[3])
	}
}

// A create says what the container is made with (issue 16, item 5).
func TestPlanTextShowsCreateSettings(t *testing.T) {
	a := &plan.App{Name: "web", Template: "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst", Unprivileged: true, Cores: 2, MemoryMiB: 512, SwapMiB: 0,
		RootStorage: "local-lvm", RootSize: 8 << 30, Bridge: "vmbr0", IP: "dhcp", Nesting: true}
	p := &plan.Plan{Changes: []plan.Change{{App: "web", Node: "pve", Action: plan.Create, Desired: a, Reasons: []string{"no container for this app"}}}}
	var b strings.Builder
	WritePlanText(&b, NewPlanJSON(p, nil))
	for _, want := range []string{
		"+ template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst",
		"+ cores: 2", "+ memory: 512 MiB", "+ rootfs: 8 GiB on local-lvm", "+ net0: name=eth0,bridge=vmbr0,ip=dhcp", "+ features: nesting=1",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("plan text lacks %q:\n%s", want, b.String())
		}
	}
}

// A create of an app with ha: shows the HA resource it gets (issue 33).
func TestPlanTextShowsCreateHA(t *testing.T) {
	a := &plan.App{Name: "web", Template: "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst", RootStorage: "nfs", RootSize: 8 << 30,
		HA: &plan.HA{State: "started", Rule: "fast", MaxRestart: 2, MaxRelocate: 1}}
	p := &plan.Plan{Changes: []plan.Change{{App: "web", Node: "pve", Action: plan.Create, Desired: a, HA: &plan.HAChange{Want: a.HA}}}}
	var b strings.Builder
	WritePlanText(&b, NewPlanJSON(p, nil))
	if want := "+ ha: started, maxRestart 2, maxRelocate 1, rule fast"; !strings.Contains(b.String(), want) {
		t.Errorf("plan text lacks %q:\n%s", want, b.String())
	}
	raw, err := json.Marshal(NewPlanJSON(p, nil).Changes[0].HA)
	if want := `{"action":"add","state":"started","rule":"fast","max_restart":2,"max_relocate":1}`; err != nil || string(raw) != want {
		t.Errorf("ha in -o json = %s %v, want %s", raw, err, want)
	}
	p.Changes[0].HA = &plan.HAChange{Have: &plan.HAResource{State: "started"}}
	if raw, _ := json.Marshal(NewPlanJSON(p, nil).Changes[0].HA); string(raw) != `{"action":"remove"}` {
		t.Errorf("removal's ha in -o json = %s", raw)
	}
}

func TestWriteFreePlanText(t *testing.T) {
	p := &plan.FreePlan{Volumes: []plan.VolumeFree{
		{Node: "pve", Keeper: 900, App: "wiki", Name: "pages", VolID: "local-lvm:vm-900-disk-1", Size: 1 << 30, Reason: "app wiki is not in the manifest"},
		{Node: "pve", Keeper: 900, VolID: "local-lvm:vm-900-disk-7", Size: 512 << 20, Reason: "keeper 900 holds it (local-lvm:vm-900-disk-7) recorded for no app"},
	}, Warnings: []string{"w"}}
	var b bytes.Buffer
	WriteFreePlanText(&b, NewFreePlanJSON(p, nil))
	want := `- volume wiki/pages (local-lvm:vm-900-disk-1 on pve, 1 GiB, keeper 900): free
      # app wiki is not in the manifest
- volume (recorded for no app) (local-lvm:vm-900-disk-7 on pve, 512 MiB, keeper 900): free
      # keeper 900 holds it (local-lvm:vm-900-disk-7) recorded for no app
! warning: w

Plan: 2 volume(s) to free (1.5 GiB). A freed volume's data cannot be recovered.
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	WriteFreePlanText(&b, NewFreePlanJSON(p, []string{"x is referenced by CT 105"}))
	if !strings.Contains(b.String(), "! refused: x is referenced by CT 105\n") || !strings.HasSuffix(b.String(), "Refused: nothing will be freed.\n") {
		t.Errorf("refused plan:\n%s", b.String())
	}
	b.Reset()
	WriteFreePlanText(&b, NewFreePlanJSON(&plan.FreePlan{}, nil))
	if b.String() != "\nNo volumes to free.\n" {
		t.Errorf("empty plan: %q", b.String())
	}
	js, _ := json.Marshal(NewFreePlanJSON(nil, nil))
	if string(js) != `{"volumes":[],"warnings":[],"refused":[]}` {
		t.Errorf("empty JSON %s", js)
	}
}

func TestWritePlanTextRemovedApp(t *testing.T) {
	p := &plan.Plan{Changes: []plan.Change{{App: "wiki", Node: "pve", VMID: 101, OldVMID: 101, Action: plan.Delete,
		Reasons: []string{"app wiki was removed from the manifest", "destroy container 101 (running); its volumes stay in the keeper"},
		Volumes: []plan.VolumeChange{{Volume: plan.Volume{Name: "pages", Mount: "/srv/pages"}, Action: plan.VolDetach, VolID: "local-lvm:vm-900-disk-1"}}}}}
	var b bytes.Buffer
	WritePlanText(&b, NewPlanJSON(p, nil))
	want := `- app wiki (delete ct 101 on pve)
      # app wiki was removed from the manifest
      # destroy container 101 (running); its volumes stay in the keeper
      volume pages: detach (local-lvm:vm-900-disk-1, at /srv/pages)

Plan: 1 to delete. Retained volumes are kept in every case.
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
