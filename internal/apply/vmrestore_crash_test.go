package apply_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/testenv"
)

// The VM restore crash test (issue 34): corral is killed at every API
// call of a restore --replace of VM app web, whose retained disks data
// and logs are in the archive; then the user runs apply, which finishes
// or rolls the restore back first. After it the app has one VM, each of
// its volumes one disk with its serial (no serial on two disks), the
// plan converges, and no data is lost: the app's disks hold either the
// archive's bytes, with the bytes they displaced kept on the keeper VM as
// *-replaced-*, or (rolled back) the bytes they held.

// vmRestoreManifest is vmVolCrashManifest without a pinned vmid: the
// restored VM has a new one.
var vmRestoreManifest = strings.ReplaceAll(vmVolCrashManifest, "    vmid: VMID\n", "")

// restoreReplaceVM runs restore --replace of VM app web's archive,
// killed at request kill (0: never), and returns the requests it made.
func (r *rig) restoreReplaceVM(archive string, kill int64) (int64, error) {
	ctx, cancel, k, c := killable(r.t, r.srv, kill)
	defer cancel()
	ex := &apply.Executor{Client: c}
	obs, err := apply.Observe(ctx, c)
	if err != nil {
		return k.count.Load(), err
	}
	rp, err := ex.PlanVMRestore(ctx, obs, apply.RestoreOptions{App: "web", Archive: archive, Replace: true, Volumes: []string{"data", "logs"}})
	if err == nil {
		_, err = ex.RestoreVM(ctx, rp)
	}
	return k.count.Load(), err
}

// userApplyVM is the apply the user runs next: the interrupted restore
// finished or rolled back, then the manifest applied.
func (r *rig) userApplyVM() error {
	ctx := context.Background()
	c := r.client(nil)
	ex := &apply.Executor{Client: c}
	obs, err := apply.Observe(ctx, c)
	if err != nil {
		return err
	}
	if obs.Interrupted() {
		if err := ex.Recover(ctx, obs); err != nil {
			return err
		}
		if obs, err = apply.Observe(ctx, c); err != nil {
			return err
		}
	}
	p, err := plan.Make(loadAppsText(r.t, vmRestoreManifest), obs)
	if err != nil {
		return err
	}
	return ex.Apply(ctx, p, obs)
}

// checkRestoredVM checks the state after the user's apply (see above):
// old are the bytes the app's disks held before the restore, archived
// those of the archive.
func (r *rig) checkRestoredVM(old, archived map[string][]byte) {
	r.t.Helper()
	obs := r.observe()
	if len(obs.VMRestores) != 0 || len(obs.VMs["web"]) != 1 {
		r.t.Fatalf("after apply: restores %+v, VMs of web %+v", obs.VMRestores, obs.VMs["web"])
	}
	p, err := plan.Make(loadAppsText(r.t, vmRestoreManifest), obs)
	if err != nil || p.HasChanges() {
		r.t.Fatalf("not converged after the apply: %v %+v", err, p)
	}
	disks := r.vmDisks()
	held := map[string]int{} // bytes → disks holding them
	for serial, holders := range disks {
		if len(holders) != 1 {
			r.t.Fatalf("serial %s is on %d disks: %v", serial, len(holders), holders)
		}
		var id int
		var key, volid string
		fmt.Sscan(holders[0], &id, &key, &volid)
		held[string(r.vmDiskBytes(volid, nil))]++
	}
	vmid := obs.VMs["web"][0].VMID
	r.checkVMDisks(vmid, nil)
	for _, name := range []string{"data", "logs"} {
		holders := disks[plan.VMVolumeSerial("web", name)]
		var id int
		var key, volid string
		fmt.Sscan(holders[0], &id, &key, &volid)
		got := r.vmDiskBytes(volid, nil)
		switch {
		case bytes.Equal(got, old[name]):
		case bytes.Equal(got, archived[name]) && held[string(old[name])] == 1:
		default:
			r.t.Fatalf("volume %s holds %q (the old bytes %q are on %d disks; all: %v)", name, got, old[name], held[string(old[name])], disks)
		}
	}
}

// TestVMRestoreKilledAtEveryAPICall: see above.
func TestVMRestoreKilledAtEveryAPICall(t *testing.T) {
	t.Parallel()
	archived := map[string][]byte{"data": []byte("data-123"), "logs": []byte("logs-456")}
	seed := applied(t, archived)
	ctx := context.Background()
	ex := &apply.Executor{Client: seed.client(nil)}
	obs := seed.observe()
	b, err := ex.Backup(ctx, obs, "web", apply.BackupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	old := map[string][]byte{"data": []byte("data-NEW"), "logs": []byte("logs-NEW")}
	for serial, holders := range seed.vmDisks() {
		for name, data := range old {
			if serial == plan.VMVolumeSerial("web", name) {
				var id int
				var key, volid string
				fmt.Sscan(holders[0], &id, &key, &volid)
				seed.vmDiskBytes(volid, data)
			}
		}
	}
	frozen := seed.freeze()
	base := thaw(t, frozen)
	n, err := base.restoreReplaceVM(b.Archive, 0)
	if err != nil {
		t.Fatalf("clean restore --replace: %v", err)
	}
	if err := base.userApplyVM(); err != nil {
		t.Fatalf("apply after the clean restore: %v", err)
	}
	base.checkRestoredVM(old, archived)
	t.Logf("a VM restore --replace makes %d requests", n)
	for _, kill := range testenv.KillPoints(t, n) {
		t.Run(fmt.Sprintf("kill-at-%d", kill), func(t *testing.T) {
			t.Parallel()
			r := thaw(t, frozen)
			if made, err := r.restoreReplaceVM(b.Archive, kill); err == nil {
				if made < kill {
					// Task polls vary from run to run (see
					// TestVMVolumesKilledAtEveryAPICall).
					t.Skipf("this run made %d requests, fewer than the kill point %d: nothing was killed", made, kill)
				}
				t.Fatalf("the restore killed at request %d of %d ended without an error", kill, n)
			}
			if err := r.userApplyVM(); err != nil {
				t.Fatalf("apply after the kill: %v", err)
			}
			r.checkRestoredVM(old, archived)
		})
	}
}
