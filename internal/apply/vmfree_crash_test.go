package apply_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/testenv"
)

// TestVMVolumeFreeKilledAtEveryAPICall (issue 34): a volumes rm of a
// destroyed VM app's retained disk, killed at each of its API calls,
// leaves the disk either on the keeper VM with its serial or freed from
// the storage, never on the storage with no VM holding it; the other
// disk keeps its place and bytes. The run again frees it (or, finding it
// freed, only sets the keeper VM's protection again) and then the keeper
// VM is protected, its Notes name the other disk alone.
func TestVMVolumeFreeKilledAtEveryAPICall(t *testing.T) {
	t.Parallel()
	bytesOf := map[string][]byte{"data": []byte("data-123"), "logs": []byte("logs-456")}
	base := applied(t, bytesOf)
	apps := loadAppsText(t, strings.ReplaceAll(vmVolCrashManifest, "VMID", "150"))
	{
		ctx, cancel, _, c := killable(t, base.srv, 0)
		obs, err := apply.Observe(ctx, c)
		if err == nil {
			var p *plan.Plan
			if p, err = plan.Destroy(apps, obs, false); err == nil {
				_, err = (&apply.Executor{Client: c}).Destroy(ctx, p, obs)
			}
		}
		cancel()
		if err != nil {
			t.Fatalf("destroy: %v", err)
		}
	}
	base.checkVMDisks(0, bytesOf)
	volid := func(disks map[string][]string, name string) string {
		var id int
		var key, v string
		if h := disks[plan.VMVolumeSerial("web", name)]; len(h) == 1 {
			fmt.Sscan(h[0], &id, &key, &v)
		}
		return v
	}
	disks := base.vmDisks()
	data, logs := volid(disks, "data"), volid(disks, "logs")
	if data == "" || logs == "" {
		t.Fatalf("after the destroy the disks are %v", disks)
	}
	frozen := base.freeze()
	free := func(r *rig, kill int64, volids []string) (int64, error) {
		ctx, cancel, k, c := killable(r.t, r.srv, kill)
		defer cancel()
		obs, err := apply.Observe(ctx, c)
		if err != nil {
			return k.count.Load(), err
		}
		refs, err := apply.VolumeRefs(ctx, c, obs)
		if err != nil {
			return k.count.Load(), err
		}
		p, err := plan.FreeVolumes(apps[0].Project, nil, obs, volids, refs)
		if err != nil {
			return k.count.Load(), err
		}
		if len(p.Volumes) != len(volids) {
			r.t.Fatalf("the plan frees %+v, want %v", p.Volumes, volids)
		}
		_, err = (&apply.Executor{Client: c}).FreeVolumes(ctx, p, obs)
		return k.count.Load(), err
	}
	n, err := free(thaw(t, frozen), 0, []string{data})
	if err != nil {
		t.Fatalf("clean free of %s: %v", data, err)
	}
	for _, kill := range testenv.KillPoints(t, n) {
		t.Run(fmt.Sprintf("kill-at-%d", kill), func(t *testing.T) {
			t.Parallel()
			r := thaw(t, frozen)
			if made, err := free(r, kill, []string{data}); err == nil {
				if made < kill {
					// A run's settle waits and retried reads may make fewer
					// requests than the clean run did: nothing was killed.
					t.Skipf("this run made %d requests, fewer than the kill point %d", made, kill)
				}
				t.Fatalf("the free killed at request %d of %d ended without an error", kill, n)
			}
			_, onStorage := r.srv.Cluster().VolumePath("pve", data)
			held := volid(r.vmDisks(), "data") == data
			if onStorage == nil && !held {
				t.Fatalf("after the kill %s is on the storage but no VM holds it (leaked): %v", data, r.vmDisks())
			}
			if got := r.vmDisks()[plan.VMVolumeSerial("web", "logs")]; len(got) != 1 || volid(r.vmDisks(), "logs") != logs {
				t.Fatalf("after the kill logs is held by %v, want %s on the keeper VM alone", got, logs)
			}
			again := []string{}
			if held {
				again = append(again, data)
			}
			if _, err := free(r, 0, again); err != nil {
				t.Fatalf("free again after the kill: %v", err)
			}
			if _, err := r.srv.Cluster().VolumePath("pve", data); err == nil {
				t.Fatalf("%s still exists after the free again", data)
			}
			if got := volid(r.vmDisks(), "logs"); got != logs || !bytes.Equal(r.vmDiskBytes(logs, nil), bytesOf["logs"]) {
				t.Fatalf("logs is %q after the free, want %s with its bytes", got, logs)
			}
			obs := r.observe()
			ks := obs.VMKeepers["pve"]
			if len(ks) != 1 || !ks[0].Protected() {
				t.Fatalf("keeper VMs after the free again: %+v", ks)
			}
			notes := plan.ParseVMKeeperNotes(ks[0].Config["description"])
			if _, ok := notes[plan.VMVolumeSerial("web", "data")]; ok || notes[plan.VMVolumeSerial("web", "logs")].Name != "logs" {
				t.Fatalf("keeper VM's Notes after the free again: %q", ks[0].Config["description"])
			}
		})
	}
}
