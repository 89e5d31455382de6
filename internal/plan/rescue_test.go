package plan_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/plan"
)

// rescueConf is a rescue container's config as Rescues.Start (internal/apply) leaves it:
// its own rootfs, the app's keeper volume at the app's path, and an
// unusedN of a keeper volume a killed detach left.
func rescueConf() map[string]string {
	return map[string]string{
		"rootfs":      "local-lvm:vm-106-disk-0,size=2G",
		"mp0":         "local-lvm:vm-999-disk-1,mp=/home/hermes,backup=1",
		"unused0":     "local-lvm:vm-999-disk-2",
		"unused1":     "local-lvm:vm-106-disk-1",
		"description": plan.RescueNotes("hermes", 105) + "corral-hostkey: ssh-ed25519 AAAA\n",
	}
}

func TestReadRescue(t *testing.T) {
	tags := []string{plan.TagManaged, plan.TagRescue, plan.TagRescuingPrefix + "hermes"}
	if !plan.IsRescue(tags) || plan.IsRescue([]string{plan.TagManaged, plan.TagAppPrefix + "hermes"}) {
		t.Fatal("IsRescue does not tell a rescue container from an app's")
	}
	r := plan.ReadRescue(106, "pve", "running", tags, rescueConf())
	if r.App != "hermes" || r.AppVMID != 105 || r.VMID != 106 || r.Node != "pve" {
		t.Fatalf("ReadRescue = %+v, want hermes's rescue 106 of ct 105", r)
	}
	if len(r.Holds) != 1 || r.Holds[0].Key != "mp0" || r.Holds[0].Volume != "local-lvm:vm-999-disk-1" || r.Holds[0].Path != "/home/hermes" {
		t.Fatalf("Holds = %+v, want the keeper volume at /home/hermes (never its own rootfs)", r.Holds)
	}
	if !slices.Equal(r.Unused, []string{"local-lvm:vm-999-disk-2"}) {
		t.Fatalf("Unused = %v, want the keeper's volume only (not one it owns)", r.Unused)
	}
	// The app comes from the Notes when the tag that names it is gone.
	if r := plan.ReadRescue(106, "pve", "stopped", []string{plan.TagManaged, plan.TagRescue}, rescueConf()); r.App != "hermes" {
		t.Fatalf("app from the Notes: %q", r.App)
	}
}

// TestMake_AppInRescue: an app whose rescue container exists is planned
// only once the rescue is ended (as an interrupted restore is), and the
// plan says so, naming the rescue CT and its node, which the lock covers.
func TestMake_AppInRescue(t *testing.T) {
	obs := converged()
	ct := obs.Apps["hermes"][0]
	delete(ct.Config, "mp0")
	ct.Status = "stopped"
	ct.ParseMounts()
	r := plan.ReadRescue(106, "pve", "running", []string{plan.TagManaged, plan.TagRescue, plan.TagRescuingPrefix + "hermes"}, rescueConf())
	obs.Rescues = map[string][]*plan.Rescue{"hermes": {r}}
	p, err := plan.Make([]plan.App{app()}, obs)
	if err != nil {
		t.Fatal(err)
	}
	if !p.HasChanges() || !p.FinishesInterrupted() {
		t.Fatal("a plan with an app in rescue has nothing to do")
	}
	if len(p.Recover) != 1 || !strings.Contains(p.Recover[0], "app hermes is in rescue") || !strings.Contains(p.Recover[0], "rescue CT 106 on pve") {
		t.Fatalf("Recover = %q, want the rescue named", p.Recover)
	}
	if !slices.Contains(p.Nodes(), "pve") {
		t.Fatalf("Nodes = %v, want the rescue's node locked", p.Nodes())
	}
	for _, c := range p.Changes {
		if c.App == "hermes" && c.Action != plan.NoOp {
			t.Fatalf("hermes is changed while in rescue: %+v", c)
		}
	}
	if !strings.Contains(r.Fix(), "corral rescue hermes --end") {
		t.Fatalf("Fix = %q", r.Fix())
	}
}
