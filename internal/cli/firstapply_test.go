package cli

import (
	"strconv"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/sim/model"
)

// TestFirstApplyCreatesTheAppWhileItsKeeperIsCreated: on a node without a
// keeper, `corral apply` holds its lock from the keeper's create on (the
// lease in the create's Notes, apply/lockclaim.go), so the app's own
// create runs while the keeper's does, not after it (issue 30: a first
// apply took the keeper's 11 s longer than Proxmox's create + start).
// Read from the emulator's task list (each vzcreate 0.55 s at time scale
// 0.05): the order of the tasks, not the wall clock.
func TestFirstApplyCreatesTheAppWhileItsKeeperIsCreated(t *testing.T) {
	t.Parallel()
	c := newCluster(t, pvetest.TimeScale(0.05))
	m := writeManifest(t, threeVolumes("alpha"))
	c.mustRun("apply", "-f", m, "--auto-approve")
	ks := c.keepers()
	if len(ks) != 1 {
		t.Fatalf("keepers %v, want one", ks)
	}
	app := c.status(m).Apps[0].Containers[0].VMID
	creates := map[string][2]int64{}
	for _, tt := range c.srv.TaskTimes() {
		if tt.Type == "vzcreate" {
			creates[tt.ID] = [2]int64{tt.Began, tt.Ended}
		}
	}
	k, a := creates[strconv.Itoa(ks[0])], creates[strconv.Itoa(app)]
	if k[0] == 0 || a[0] == 0 || len(creates) != 2 {
		t.Fatalf("vzcreate tasks %v, want the keeper's (%d) and the app's (%d)", creates, ks[0], app)
	}
	if a[0] >= k[1] {
		t.Errorf("the app's vzcreate began %v after the keeper's ended; want it to run while the keeper is created", time.Duration(a[0]-k[1]))
	}
	for _, v := range c.volumes() {
		if got := c.mountedBy(v.VolID); len(got) != 1 || got[0] != app {
			t.Errorf("volume %s mounted by %v, want the app %d alone", v.VolID, got, app)
		}
	}
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Errorf("plan after the first apply: exit %d\n%s", r.code, r.stdout)
	}
	conf, _, err := c.srv.Cluster().CTConfig(model.Auth{UserID: "root@pam"}, "pve", ks[0], true, "")
	if err != nil {
		t.Fatal(err)
	}
	if l := plan.ParseLease(conf["description"]); l != nil {
		t.Errorf("lease left in the keeper: %+v", l)
	}
}
