package cli

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/plan"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/sim"
)

// retainedDisks are the drives of every VM on the emulator that carry a
// retained disk's serial, by serial: "vmid volid" of each holder. It
// fails on a serial found on two disks; the VM of a restore in flight
// (corral-restoring-*), whose disks carry the archived serials until the
// switch and which no plan counts, is left out.
func (c *cluster) retainedDisks() map[string][]string {
	c.t.Helper()
	ctx := context.Background()
	root := c.pveRoot()
	res, err := root.ClusterResources(ctx, "vm")
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string][]string{}
	for _, r := range res {
		if r.Type != "qemu" || strings.Contains(r.Tags, plan.TagRestoringPrefix) {
			continue
		}
		conf, err := root.VMConfigOf(ctx, r.Node, r.VMID, true)
		if err != nil {
			c.t.Fatal(err)
		}
		for serial, d := range plan.VMVolumeDisks(conf.Values) {
			out[serial] = append(out[serial], strconv.Itoa(r.VMID)+" "+d.Volume)
		}
	}
	for serial, holders := range out {
		if len(holders) > 1 {
			c.t.Fatalf("serial %s is on %d disks: %v", serial, len(holders), holders)
		}
	}
	return out
}

// retainedBytes is the start of the disk of serial (which must exist).
func (c *cluster) retainedBytes(serial string, n int) string {
	c.t.Helper()
	holders := c.retainedDisks()[serial]
	if len(holders) != 1 {
		c.t.Fatalf("no disk has serial %s", serial)
	}
	_, volid, _ := strings.Cut(holders[0], " ")
	return string(c.diskBytes(volid, nil)[:n])
}

// vmRestoreOf runs corral restore web with args and -o json, and decodes
// its result; the plan it printed first is returned too.
func (c *cluster) vmRestoreOf(args ...string) (apply.VMRestoreResult, string) {
	c.t.Helper()
	r := c.mustC(append(append([]string{"restore", "web"}, args...), "--auto-approve", "-o", "json")...)
	var res apply.VMRestoreResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		c.t.Fatalf("restore -o json: %v\n%s%s", err, r.stdout, r.stderr)
	}
	return res, r.stderr
}

// TestVMRestoreRetainedDisks (issue 34): a VM app's archive holds its
// retained disk, and a restore brings the disk back as a retained disk
// of the app it makes, never as a second disk with a serial one already
// has: beside the app (--as copy) the disk takes the copy's serial; with
// --replace the old VM goes, its disk stays on the keeper VM as
// data-replaced-<stamp> and the restored one is the app's; restored as
// the app after a destroy, the keeper VM's disk is displaced the same
// way. After each the project's plan has nothing to do.
func TestVMRestoreRetainedDisks(t *testing.T) {
	t.Parallel()
	c, _ := vmBackupCluster(t)
	m := vmAppManifest(t, "10.20.0.50/24", "", "    volumes:\n      - {name: data, size: 1G}\n")
	c.mustRun("apply", "-f", m, "--auto-approve")
	vmid, _, _ := c.vmOf(m)
	data := plan.VMVolumeSerial("web", "data")
	holders := c.retainedDisks()[data]
	if len(holders) != 1 || !strings.HasPrefix(holders[0], strconv.Itoa(vmid)+" ") {
		t.Fatalf("data's disk: %v, want one on vm %d", holders, vmid)
	}
	_, volid, _ := strings.Cut(holders[0], " ")
	c.diskBytes(volid, []byte("backed-up"))
	b := c.vmBackupOf(m)
	c.diskBytes(volid, []byte("later-one"))

	res, preview := c.vmRestoreOf("--archive", b.Archive, "--as", "copy", "--ip", "10.20.0.51/24", "-f", m)
	copySerial := plan.VMVolumeSerial("copy", "data")
	if len(res.Volumes) != 1 || res.Volumes[0].Name != "data" || res.Volumes[0].Serial != copySerial || len(res.Renamed) != 0 ||
		!strings.Contains(preview, "volume data (scsi1): restored from the archive as a retained disk of app copy") {
		t.Fatalf("restore --as copy: %+v\n%s", res, preview)
	}
	if got := c.retainedBytes(copySerial, 9); got != "backed-up" || !strings.HasPrefix(c.retainedDisks()[copySerial][0], strconv.Itoa(res.VMID)+" ") {
		t.Errorf("the copy's disk holds %q (%v)", got, c.retainedDisks()[copySerial])
	}
	if got := c.retainedBytes(data, 9); got != "later-one" {
		t.Errorf("the app's disk holds %q after the copy's restore", got)
	}
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Fatalf("plan with the copy beside the app: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	res, preview = c.vmRestoreOf("--archive", b.Archive, "--replace", "-f", m)
	if !res.Replace || res.OldVMID != vmid || res.Destroyed != vmid || res.Status != "running" || len(res.Renamed) != 1 ||
		!strings.HasPrefix(res.Renamed[0].To, "web/data-replaced-") || !strings.Contains(preview, "replaces vm "+strconv.Itoa(vmid)) {
		t.Fatalf("restore --replace: %+v\n%s", res, preview)
	}
	if _, err := c.pveRoot().VMConfigOf(context.Background(), "pve", vmid, true); !pve.IsNotFound(err) {
		t.Errorf("the replaced vm %d: %v, want it destroyed", vmid, err)
	}
	if id, st, _ := c.vmOf(m); id != res.VMID || st != "running" {
		t.Errorf("after --replace the app is vm %d %s, want %d running", id, st, res.VMID)
	}
	if got := c.retainedBytes(data, 9); got != "backed-up" || !strings.HasPrefix(c.retainedDisks()[data][0], strconv.Itoa(res.VMID)+" ") {
		t.Errorf("after --replace the app's disk holds %q (%v)", got, c.retainedDisks()[data])
	}
	aside := plan.VMVolumeSerial("web", strings.TrimPrefix(res.Renamed[0].To, "web/"))
	if got := c.retainedBytes(aside, 9); got != "later-one" || !strings.HasSuffix(c.retainedDisks()[aside][0], " "+res.Renamed[0].VolID) {
		t.Errorf("the displaced disk %s (%s) holds %q (%v)", res.Renamed[0].To, res.Renamed[0].VolID, got, c.retainedDisks()[aside])
	}
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Fatalf("plan after --replace: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	c.mustRun("destroy", "web", "-f", m, "--auto-approve")
	c.diskBytes(strings.SplitN(c.retainedDisks()[data][0], " ", 2)[1], []byte("destroyed"))
	res, _ = c.vmRestoreOf("--archive", b.Archive, "-f", m)
	if res.Name != "web" || len(res.Renamed) != 1 || res.Renamed[0].To == "" {
		t.Fatalf("restore of the destroyed app: %+v", res)
	}
	if got := c.retainedBytes(data, 9); got != "backed-up" || !strings.HasPrefix(c.retainedDisks()[data][0], strconv.Itoa(res.VMID)+" ") {
		t.Errorf("the restored app's disk holds %q (%v)", got, c.retainedDisks()[data])
	}
	if got := c.retainedBytes(plan.VMVolumeSerial("web", strings.TrimPrefix(res.Renamed[0].To, "web/")), 9); got != "destroyed" {
		t.Errorf("the displaced disk %s holds %q", res.Renamed[0].To, got)
	}
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Fatalf("plan after restoring the app: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if serials := c.retainedDisks(); len(serials) != 4 || len(serials[aside]) != 1 {
		t.Errorf("retained disks after the restores: %v, want data of web and copy and two displaced ones", serials)
	}
}

// TestVMRestoreInterrupted (issue 34): a VM restore that stops after the
// restore task (here the keeper VM's config write fails) leaves a
// restore in flight, never a second VM of the app or two disks with one
// serial: corral plan says what the next apply does about it, a new
// restore waits for it, and apply finishes it: the restored VM is the
// app's, with the archive's bytes on its disk, and the disk it displaced
// stays on the keeper VM.
func TestVMRestoreInterrupted(t *testing.T) {
	t.Parallel()
	c, _ := vmBackupCluster(t)
	m := vmAppManifest(t, "10.20.0.50/24", "", "    volumes:\n      - {name: data, size: 1G}\n")
	c.mustRun("apply", "-f", m, "--auto-approve")
	data := plan.VMVolumeSerial("web", "data")
	_, volid, _ := strings.Cut(c.retainedDisks()[data][0], " ")
	c.diskBytes(volid, []byte("backed-up"))
	b := c.vmBackupOf(m)
	c.mustRun("destroy", "web", "-f", m, "--auto-approve")
	_, volid, _ = strings.Cut(c.retainedDisks()[data][0], " ")
	c.diskBytes(volid, []byte("destroyed"))
	keeper, _, _ := strings.Cut(c.retainedDisks()[data][0], " ")

	c.srv.SetFaults(sim.FaultSpec{Write5xx: 1, Match: "/qemu/" + keeper + "/config"})
	r := c.runC("restore", "web", "--archive", b.Archive, "-f", m, "--auto-approve")
	c.srv.SetFaults(sim.FaultSpec{})
	if r.code == 0 || !strings.Contains(r.stderr, "restore stopped") {
		t.Fatalf("restore with the keeper VM's writes failing: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if got := c.retainedBytes(data, 9); got != "destroyed" || !strings.HasPrefix(c.retainedDisks()[data][0], keeper+" ") {
		t.Fatalf("the keeper VM's disk after the failed switch: %q %v", got, c.retainedDisks()[data])
	}
	if r := c.run("plan", "-f", m); r.code != ExitChanges || !strings.Contains(r.stdout+r.stderr, "a restore of VM app web was interrupted") {
		t.Fatalf("plan with a VM restore in flight: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := c.runC("restore", "web", "--archive", b.Archive, "-f", m, "--auto-approve"); r.code == 0 || !strings.Contains(r.stderr, "run corral apply first") {
		t.Fatalf("a second restore while one is in flight: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.mustRun("apply", "-f", m, "--auto-approve")
	if _, st, _ := c.vmOf(m); st != "running" {
		t.Errorf("after apply the app's vm is %s", st)
	}
	if got := c.retainedBytes(data, 9); got != "backed-up" || strings.HasPrefix(c.retainedDisks()[data][0], keeper+" ") {
		t.Errorf("after apply the app's disk holds %q (%v)", got, c.retainedDisks()[data])
	}
	if disks := c.retainedDisks(); len(disks) != 2 {
		t.Errorf("retained disks after apply: %v, want the app's and the displaced one", disks)
	}
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Fatalf("plan after apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
