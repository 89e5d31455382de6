package apply_test

import (
	"fmt"
	"github.com/corralhq/corral/internal/testenv"
	"testing"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
)

// TestFreeKilledAtEveryAPICall: a `volumes rm` of a destroyed app's
// volume killed at each of its API calls leaves the volume either freed
// or still recorded (a record whose mount point is gone, which the next
// plan mounts again), never on the keeper recorded for no app; the run
// again frees it, and nothing else is lost or leaked.
func TestFreeKilledAtEveryAPICall(t *testing.T) {
	t.Parallel()
	base := newRig(t)
	for _, ph := range cycle[:1] {
		if _, err := base.run(ph, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := base.run(phase{name: "destroy", memory: "512", template: debian12, destroy: true}, 0); err != nil {
		t.Fatal(err)
	}
	recs := records(base.observe())
	frozen := base.freeze()
	var key, volid string
	for k, v := range recs {
		if key == "" || k < key {
			key, volid = k, v
		}
	}
	free := func(r *rig, kill int64) (int64, error) {
		ctx, cancel, k, c := killable(r.t, r.srv, kill)
		defer cancel()
		obs, err := apply.Observe(ctx, c)
		if err != nil {
			return k.count.Load(), err
		}
		refs, err := apply.NodeReferences(ctx, c, "pve")
		if err != nil {
			return k.count.Load(), err
		}
		byVol := map[string][]string{}
		for v, rs := range refs {
			for _, ref := range rs {
				byVol[v] = append(byVol[v], fmt.Sprintf("ct %d", ref.VMID))
			}
		}
		if r := obs.Keepers["pve"]; len(r) > 0 {
			for v := range byVol {
				if plan.VolumeOwner(v) == r[0].VMID {
					delete(byVol, v) // the keeper's own references are its records
				}
			}
		}
		p, err := plan.FreeVolumes("apply", nil, obs, []string{volid}, byVol)
		if err != nil {
			return k.count.Load(), err
		}
		_, err = (&apply.Executor{Client: c}).FreeVolumes(ctx, p, obs)
		return k.count.Load(), err
	}
	n, err := free(thaw(t, frozen), 0)
	if err != nil {
		t.Fatalf("clean free of %s (%s): %v", volid, key, err)
	}
	for _, kill := range testenv.KillPoints(t, n) {
		t.Run(fmt.Sprintf("kill-at-%d", kill), func(t *testing.T) {
			t.Parallel()
			r := thaw(t, frozen)
			free(r, kill)
			obs := r.observe()
			k := obs.Keepers["pve"][0]
			_, exists := obs.Volumes["pve/"+volid]
			recorded := false
			for _, v := range k.Records {
				recorded = recorded || v == volid
			}
			if exists && !recorded {
				t.Fatalf("after the kill %s exists but no keeper record names it (orphaned); keeper config %v", volid, k.Config)
			}
			if exists {
				if _, err := free(r, 0); err != nil {
					t.Fatalf("free again after the kill: %v", err)
				}
			}
			obs = r.observe()
			if _, ok := obs.Volumes["pve/"+volid]; ok {
				t.Errorf("%s still exists after the second free", volid)
			}
			for vk, v := range records(obs) {
				if v == volid {
					t.Errorf("%s still recorded as %s", volid, vk)
				}
			}
			for k2, v := range recs {
				if v != volid && records(obs)[k2] != v {
					t.Errorf("record %s (%s) changed: now %q", k2, v, records(obs)[k2])
				}
			}
		})
	}
}
