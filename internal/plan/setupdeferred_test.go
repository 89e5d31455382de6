package plan

import (
	"errors"
	"testing"
)

// TestMake_setupDeferred: on an observation without the bridges and
// templates (Observed.SetupDeferred) Make plans nothing but an empty plan:
// a create would go without its template and bridge checks, so it says
// what it lacks instead (ErrSetupUnread); with the setup read, the same
// apps plan.
func TestMake_setupDeferred(t *testing.T) {
	obs := func(deferred bool) *Observed {
		return &Observed{Nodes: []string{"pve1"}, Apps: map[string][]*CT{}, Keepers: map[string][]*Keeper{},
			Volumes: map[string]int64{}, Storages: map[string]map[string][]string{}, SetupDeferred: deferred}
	}
	apps := []App{{Name: "web", Node: "pve1", Template: "local:vztmpl/t.tar.zst"}}
	if p, err := Make(apps, obs(true)); !errors.Is(err, ErrSetupUnread) || p != nil {
		t.Errorf("create on a deferred setup: plan %v, err %v; want ErrSetupUnread", p, err)
	}
	if p, err := Make(apps, obs(false)); err != nil || !p.HasChanges() {
		t.Errorf("create with the setup read: err %v, want a plan with changes", err)
	}
	if p, err := Make(nil, obs(true)); err != nil || p.HasChanges() {
		t.Errorf("nothing to do on a deferred setup: err %v, want an empty plan", err)
	}
}
