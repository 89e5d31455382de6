package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/sim"
)

// moveStatusJSON is what `corral status -o json` says of a move.
type moveStatusJSON struct {
	Apps []struct {
		App    string `json:"app"`
		Moving *struct {
			From        string `json:"from"`
			To          string `json:"to"`
			Phase       string `json:"phase"`
			CarrierVMID int    `json:"carrier_vmid"`
			CarrierNode string `json:"carrier_node"`
			Carried     int    `json:"carried"`
			Volumes     int    `json:"volumes"`
			Fix         string `json:"fix"`
		} `json:"moving"`
	} `json:"apps"`
}

func (c *cluster) moveStatus(m string) moveStatusJSON {
	c.t.Helper()
	r := c.mustRun("status", "-f", m, "-o", "json")
	var s moveStatusJSON
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		c.t.Fatalf("status -o json: %v\n%s", err, r.stdout)
	}
	return s
}

// interruptMove starts moving web from pve1 to pve2 with every migrate
// request refused (a 500 before any change): the move stops with the
// carrier on pve1 holding both volumes, as a kill right before the
// migration leaves it.
func (c *cluster) interruptMove(m1, m2 string) {
	c.t.Helper()
	c.mustRun("apply", "-f", m1, "--auto-approve")
	c.markWeb(m1, "pve1")
	c.srv.SetFaults(sim.FaultSpec{Seed: 1, Write5xx: 1, Match: "/migrate"})
	if r := c.run("apply", "-f", m2, "--auto-approve"); r.code == 0 {
		c.t.Fatalf("apply with every migrate refused succeeded:\n%s%s", r.stdout, r.stderr)
	}
	c.srv.SetFaults(sim.FaultSpec{})
}

// TestStatusShowsInterruptedMove: while a move's carrier exists, status
// shows the app as moving (from, to, phase, what the carrier holds) with
// the fix, in text and in JSON; apply finishes the move and the mark
// goes.
func TestStatusShowsInterruptedMove(t *testing.T) {
	t.Parallel()
	c := newMoveCluster(t)
	m1, m2 := writeManifest(t, moveManifestOn("pve1")), writeManifest(t, moveManifestOn("pve2"))
	c.interruptMove(m1, m2)

	st := c.moveStatus(m2)
	mv := st.Apps[0].Moving
	if st.Apps[0].App != "web" || mv == nil {
		t.Fatalf("status -o json during the move: %+v", st.Apps)
	}
	if mv.From != "pve1" || mv.To != "pve2" || mv.Phase != "migrating" || mv.CarrierNode != "pve1" || mv.CarrierVMID == 0 ||
		mv.Carried != 2 || mv.Volumes != 2 || !strings.Contains(mv.Fix, "corral apply") || !strings.Contains(mv.Fix, "node: pve1") {
		t.Errorf("moving = %+v", *mv)
	}
	if st.Apps[1].Moving != nil {
		t.Errorf("api is not moving: %+v", *st.Apps[1].Moving)
	}
	r := c.run("status", "-f", m2)
	for _, want := range []string{
		"(moving pve1 → pve2)",
		fmt.Sprintf("web: moving from pve1 to pve2, migrating (carrier ct %d on pve1 holds 2 of 2 volumes): run corral apply", mv.CarrierVMID),
		"to roll it back instead, set node: pve1 for web",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status text lacks %q:\n%s", want, r.stdout)
		}
	}

	c.mustRun("apply", "-f", m2, "--auto-approve")
	if st := c.moveStatus(m2); st.Apps[0].Moving != nil {
		t.Errorf("still moving after apply: %+v", *st.Apps[0].Moving)
	}
	c.checkMoved(m2, "pve2", "pve1", nil)
}

// TestRollbackFreesStaleCopies: a move stopped before its carrier
// migrated, and a failed migration's copies of the carrier's volumes on
// the target (PVE leaves them, named for the carrier and referenced by
// nothing, and says so only in the task log, which a killed corral never
// read). Rolling the move back (node: back to pve1) frees those copies,
// and only those: a volume named for the carrier that another guest's
// config references stays.
func TestRollbackFreesStaleCopies(t *testing.T) {
	t.Parallel()
	c := newMoveCluster(t)
	m1, m2 := writeManifest(t, moveManifestOn("pve1")), writeManifest(t, moveManifestOn("pve2"))
	c.interruptMove(m1, m2)
	car := c.moveStatus(m2).Apps[0].Moving.CarrierVMID

	ctx := context.Background()
	pc := c.pveRoot()
	var stale []string
	for _, disk := range []string{"vm-%d-disk-1", "vm-%d-disk-2"} {
		volid, err := pc.AllocVolume(ctx, "pve2", "local-lvm", car, fmt.Sprintf(disk, car), "1G")
		if err != nil {
			t.Fatal(err)
		}
		stale = append(stale, volid)
	}
	// Someone's guest on pve2 mounts a volume named for the carrier.
	kept, err := pc.AllocVolume(ctx, "pve2", "local-lvm", car, fmt.Sprintf("vm-%d-disk-7", car), "1G")
	if err != nil {
		t.Fatal(err)
	}
	upid, err := pc.CreateContainer(ctx, "pve2", &pve.ContainerCreate{VMID: 900, Config: pve.ConfigUpdate{Hostname: pve.Ptr("other")},
		OSTemplate: "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst", RootFS: pve.MountPoint{Volume: "local-lvm:1"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pc.WaitTask(ctx, upid, pve.WaitOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pc.UpdateContainerConfig(ctx, "pve2", 900, &pve.ConfigUpdate{MountPoints: map[int]pve.MountPoint{0: {Volume: kept, Path: "/srv/other"}}}); err != nil {
		t.Fatal(err)
	}

	r := c.mustRun("apply", "-f", m1, "--auto-approve")
	if !strings.Contains(r.stderr+r.stdout, "stale copy") {
		t.Errorf("apply does not say it freed the stale copies:\n%s%s", r.stdout, r.stderr)
	}
	for _, volid := range stale {
		if _, err := c.srv.Cluster().VolumePath("pve2", volid); err == nil {
			t.Errorf("stale copy %s is still on pve2", volid)
		}
	}
	if _, err := c.srv.Cluster().VolumePath("pve2", kept); err != nil {
		t.Errorf("%s, which CT 900 mounts, was freed: %v", kept, err)
	}
	apps, carriers := c.where()
	if apps["web"] != "pve1" || carriers != 0 {
		t.Fatalf("after the rollback: web on %q, %d carriers", apps["web"], carriers)
	}
	for _, v := range c.status(m1).Apps[0].Volumes {
		data, err := os.ReadFile(filepath.Join(c.volumeDir("pve1", v.VolID), "marker"))
		if err != nil || string(data) != "web/"+v.Name {
			t.Errorf("volume %s after the rollback: marker %q %v", v.Name, data, err)
		}
	}
	c.noStrays()
}
