package plan_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/plan"
)

// onTwoNodesMoved is onTwoNodes with hermes's container on pve2 and a
// keeper there (ct 998) recording home as local-lvm:vm-998-disk-1, which
// the container mounts: the state after a move, with pve1's keeper 999
// still recording the old copy (the state issue 26's restore left).
func onTwoNodesMoved() *plan.Observed {
	obs := onTwoNodes()
	ct := obs.Apps["hermes"][0]
	ct.Node = "pve2"
	ct.Config["mp0"] = "local-lvm:vm-998-disk-1,mp=/home/hermes,backup=1,size=10G"
	obs.Keepers["pve2"] = []*plan.Keeper{plan.NewKeeper(998, "pve2", map[string]string{
		"mp0": "local-lvm:vm-998-disk-1,mp=/corral/hermes/home,size=10G", "protection": "1",
		"description": plan.KeeperDescription(map[plan.VolumeKey]string{{App: "hermes", Name: "home"}: "local-lvm:vm-998-disk-1"})})}
	obs.Volumes["pve2/local-lvm:vm-998-disk-1"] = 10 << 30
	obs.Volumes["pve2/local-lvm:vm-105-disk-0"] = 20 << 30
	delete(obs.Volumes, "pve1/local-lvm:vm-105-disk-0")
	return obs
}

// TestVolumeRecordedTwice: a volume with two copies corral knows of is
// refused naming both and the fix, never planned on one of them; no
// message says moves are not supported.
func TestVolumeRecordedTwice(t *testing.T) {
	tests := []struct {
		name    string
		node    string // the manifest's node
		edit    func(obs *plan.Observed)
		refused []string // substrings of the refusal; nil: a plan
		planned bool     // the refused plan still shows the app's change
	}{
		{name: "records in keepers on two nodes, the app on one of them",
			refused: []string{"app hermes: volume home is recorded twice, by keeper ct 999 on node pve1 (local-lvm:vm-999-disk-1, 10 GiB) and by keeper ct 998 on node pve2 (local-lvm:vm-998-disk-1, 10 GiB)", "corral volumes rm VOLID"}},
		{name: "the same, with the manifest pinning the old node",
			node:    "pve1",
			refused: []string{"volume home is recorded twice"}},
		{name: "a record only on the other node than the container's",
			edit: func(obs *plan.Observed) {
				delete(obs.Keepers, "pve2")
			},
			refused: []string{"volume home is recorded by keeper ct 999 on node pve1 (local-lvm:vm-999-disk-1, 10 GiB), but the app's container ct 105 runs on node pve2", "A volume recorded on two nodes"}},
		{name: "no container, the record on another node than the manifest's",
			node: "pve2",
			edit: func(obs *plan.Observed) {
				delete(obs.Keepers, "pve2")
				delete(obs.Apps, "hermes")
			},
			planned: true,
			refused: []string{"volume home is recorded by keeper ct 999 on node pve1", "the app has no container; the manifest places it on node pve2", "set node: pve1", "set node: pve1 and apply (the app is created there on its volume), then set node: pve2 again and apply"}},
		{name: "the record moved with the app: a plan",
			edit: func(obs *plan.Observed) {
				obs.Keepers["pve1"][0] = plan.NewKeeper(999, "pve1", map[string]string{"protection": "1"})
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, obs := app(), onTwoNodesMoved()
			a.Node = tt.node
			if tt.edit != nil {
				tt.edit(obs)
			}
			p, err := plan.Make([]plan.App{a}, obs)
			var refused *plan.RefusedError
			if tt.refused == nil {
				if err != nil {
					t.Fatal(err)
				}
				if c := p.Changes[0]; c.Action != plan.NoOp || c.Node != "pve2" {
					t.Fatalf("change %+v, want hermes left as it is on pve2", c)
				}
				return
			}
			if !errors.As(err, &refused) {
				t.Fatalf("err %v, want a refusal", err)
			}
			all := strings.Join(refused.Problems, "\n")
			for _, want := range tt.refused {
				if !strings.Contains(all, want) {
					t.Errorf("refusal lacks %q:\n%s", want, all)
				}
			}
			if strings.Contains(all, "not supported") {
				t.Errorf("refusal says moves are not supported:\n%s", all)
			}
			for _, c := range p.Changes {
				if c.App == "hermes" && !tt.planned {
					t.Errorf("a refused app is planned: %+v", c)
				}
			}
		})
	}
}
