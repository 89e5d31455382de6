package cli

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/agent"
	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/sim/model"
	"golang.org/x/sys/unix"
)

// vmBackupCluster is an emulator whose VMs have a guest agent that
// answers (fs-freeze included), with the VM image offered.
func vmBackupCluster(t *testing.T) (*cluster, *model.AgentVMRuntime) {
	c := newCluster(t)
	rt := model.NewAgentVMRuntime()
	c.srv.Cluster().SetVMRuntime(rt)
	c.offerVMImage()
	return c, rt
}

// vmAppManifest is app web as a VM with a static address, its vm: keys
// given by vm and extra app keys after them.
func vmAppManifest(t *testing.T, ip, vm, extra string) string {
	return writeManifest(t, vmAppText(ip, vm, extra))
}

// vmAppText is vmAppManifest's text.
func vmAppText(ip, vm, extra string) string {
	network := "{ip: dhcp}"
	if ip != "dhcp" {
		network = "{ip: " + ip + ", gateway: 10.20.0.1}"
	}
	return ("apps:\n  - name: web\n    kind: vm\n    memory: 1024\n    cores: 1\n" +
		"    network: " + network + "\n    ssh: {publicKeys: [\"" + vmKey + "\"]}\n" +
		"    vm: {disk: {size: 2G}, user: admin" + vm + "}\n" + extra)
}

// vmBackupOf runs corral backup web -o json and decodes its result.
func (c *cluster) vmBackupOf(m string) apply.BackupResult {
	c.t.Helper()
	r := c.mustC("backup", "web", "-f", m, "-o", "json")
	var res apply.BackupResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		c.t.Fatalf("backup -o json: %v\n%s", err, r.stdout)
	}
	return res
}

// taskLog is the whole log of task upid, read as root.
func (c *cluster) taskLog(upid string) string {
	c.t.Helper()
	lines, _, err := c.pveRoot().TaskLog(context.Background(), upid, 0, 5000)
	if err != nil {
		c.t.Fatal(err)
	}
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l.T + "\n")
	}
	return b.String()
}

// TestVMBackupConsistency (issue 34): the plan of a VM app and corral
// backup say whether a snapshot-mode backup is app-consistent. With the
// agent answering, vzdump freezes and thaws the guest's filesystems
// (the agent's calls and the task's log show both) and the backup says
// app-consistent; with vm.agent false, or an agent that does not
// answer, it says crash-consistent and why.
func TestVMBackupConsistency(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, vm, plan string
		mute           bool
		want, why      string
		froze          bool
	}{
		{name: "agent", plan: "app-consistent", want: apply.ConsistentApp, why: "froze", froze: true},
		{name: "agent off", vm: ", agent: false", plan: "crash-consistent: vm.agent is off", want: apply.ConsistentCrash, why: "vm.agent: false"},
		{name: "agent silent", plan: "app-consistent", mute: true, want: apply.ConsistentCrash, why: "did not answer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, rt := vmBackupCluster(t)
			m := vmAppManifest(t, "10.20.0.50/24", tc.vm, "    backup: {keep: 2}\n")
			if r := c.run("plan", "-f", m); r.code != ExitChanges || !strings.Contains(r.stdout, tc.plan) {
				t.Fatalf("plan: exit %d, want %q in it\n%s%s", r.code, tc.plan, r.stdout, r.stderr)
			}
			c.mustRun("apply", "-f", m, "--auto-approve")
			vmid, _, _ := c.vmOf(m)
			rt.Mute(vmid, tc.mute)
			res := c.vmBackupOf(m)
			if res.Kind != "vm" || res.VMID != vmid || res.Mode != "snapshot" || res.Consistency != tc.want || !strings.Contains(res.ConsistencyWhy, tc.why) ||
				!strings.Contains(res.Archive, "vzdump-qemu-"+strconv.Itoa(vmid)+"-") {
				t.Fatalf("backup: %+v, want %s (%q)", res, tc.want, tc.why)
			}
			calls := rt.Calls(vmid)
			fi, ti := slices.Index(calls, "fsfreeze-freeze"), slices.Index(calls, "fsfreeze-thaw")
			log := c.taskLog(res.UPID)
			logged := strings.Contains(log, "issuing guest-agent 'fs-freeze' command") && strings.Contains(log, "issuing guest-agent 'fs-thaw' command")
			if tc.froze != (fi >= 0 && ti > fi) || tc.froze != logged {
				t.Errorf("agent calls %q, task log:\n%s\nwant freeze then thaw: %v", calls, log, tc.froze)
			}
			list := c.mustC("backups", "web").stdout
			if !strings.Contains(list, res.Archive) || !strings.Contains(list, "vm "+strconv.Itoa(vmid)) {
				t.Errorf("backups does not list %s of vm %d:\n%s", res.Archive, vmid, list)
			}
			c.nextArchiveSecond() // archive names have one-second resolution
			text := c.mustC("backup", "web", "-f", m).stdout
			if !strings.Contains(text, tc.want+": ") || tc.want == apply.ConsistentCrash && !strings.Contains(text, "not app-consistent") {
				t.Errorf("backup's text does not say %s:\n%s", tc.want, text)
			}
			if tc.froze {
				// Stop mode: the VM is off for the copy, then runs again.
				c.nextArchiveSecond()
				r := c.mustC("backup", "web", "-f", m, "--mode", "stop", "-o", "json")
				var stop apply.BackupResult
				if err := json.Unmarshal([]byte(r.stdout), &stop); err != nil || stop.Mode != "stop" || stop.Consistency != apply.ConsistentStopped {
					t.Errorf("stop-mode backup: %+v %v", stop, err)
				}
				if _, st, _ := c.vmOf(m); st != "running" {
					t.Errorf("after a stop-mode backup the vm is %s", st)
				}
			}
		})
	}
}

// TestVMRestore (issue 34): a VM app's archive restores into a new VMID
// beside the app, with new MACs and the name, tags and Notes of the copy,
// and its disk's data identical to the backed-up one; the project's plan
// leaves the copy alone, and corral destroy COPY removes it. Restored as
// the app itself (after a destroy), a fresh plan sees it as the app and
// has nothing to do.
func TestVMRestore(t *testing.T) {
	t.Parallel()
	c, _ := vmBackupCluster(t)
	m := vmAppManifest(t, "10.20.0.50/24", "", "")
	c.mustRun("apply", "-f", m, "--auto-approve")
	vmid, _, _ := c.vmOf(m)
	ctx := context.Background()
	root := c.pveRoot()
	conf, err := root.VMConfigOf(ctx, "pve", vmid, true)
	if err != nil {
		t.Fatal(err)
	}
	disk := c.vmDiskFile(conf.Values["scsi0"])
	// Data the guest wrote, so that the comparison is of more than the image.
	f, err := os.OpenFile(disk, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("corral data written by the guest"), 1<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	want := fileDigest(t, disk)
	b := c.vmBackupOf(m)
	if r := c.runC("restore", "web", "--archive", b.Archive, "--as", "web", "-f", m, "--auto-approve"); r.code == 0 || !strings.Contains(r.stderr, "--as NEWNAME") {
		t.Fatalf("restore as the running app: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := c.runC("restore", "web", "--archive", b.Archive, "-f", m, "--auto-approve")
	if r.code == 0 || !strings.Contains(r.stderr, "static address 10.20.0.50/24") {
		t.Fatalf("restore of a copy on the app's address: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var res apply.VMRestoreResult
	r = c.mustC("restore", "web", "--archive", b.Archive, "--as", "copy", "--ip", "10.20.0.51/24", "-f", m, "--auto-approve", "-o", "json")
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("restore -o json: %v\n%s", err, r.stdout)
	}
	if res.VMID == vmid || res.Status != "running" || res.Name != "copy" || res.MAC == "" || strings.Contains(conf.Values["net0"], res.MAC) {
		t.Fatalf("restored: %+v (the app is vm %d, net0 %s)", res, vmid, conf.Values["net0"])
	}
	copyConf, err := root.VMConfigOf(ctx, "pve", res.VMID, true)
	if err != nil {
		t.Fatal(err)
	}
	if v := copyConf.Values; v["name"] != "copy" || !strings.Contains(v["tags"], "corral-app-copy") || strings.Contains(v["tags"], "corral-app-web") ||
		!strings.Contains(v["description"], "corral-copy-of: web") || v["ipconfig0"] != "ip=10.20.0.51/24,gw=10.20.0.1" {
		t.Errorf("the copy's identity: %v", v)
	}
	if got := fileDigest(t, c.vmDiskFile(copyConf.Values["scsi0"])); got != want {
		t.Errorf("the copy's disk differs from the backed-up one")
	}
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Fatalf("plan with the copy beside the app: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.mustRun("destroy", "copy", "-f", m, "--auto-approve")
	if _, err := root.VMConfigOf(ctx, "pve", res.VMID, true); !pve.IsNotFound(err) {
		t.Fatalf("the copy vm %d after corral destroy copy: %v", res.VMID, err)
	}
	if id, st, _ := c.vmOf(m); id != vmid || st != "running" {
		t.Fatalf("destroying the copy touched the app: vm %d %s", id, st)
	}
	c.mustRun("destroy", "-f", m, "--auto-approve")
	r = c.mustC("restore", "web", "--archive", b.Archive, "-f", m, "--auto-approve", "-o", "json")
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatal(err)
	}
	if id, st, _ := c.vmOf(m); id != res.VMID || st != "running" {
		t.Fatalf("after restoring the destroyed app: vm %d %s, want %d running", id, st, res.VMID)
	}
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Fatalf("plan after restoring the app: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	again, _ := root.VMConfigOf(ctx, "pve", res.VMID, true)
	if got := fileDigest(t, c.vmDiskFile(again.Values["scsi0"])); got != want {
		t.Errorf("the restored app's disk differs from the backed-up one")
	}
}

// vmDiskFile is the emulator's file of a VM drive value's volume.
func (c *cluster) vmDiskFile(drive string) string {
	c.t.Helper()
	volid, _, _ := strings.Cut(drive, ",")
	p, err := c.srv.Cluster().VolumePath("pve", volid)
	if err != nil {
		c.t.Fatal(err)
	}
	return p
}

// TestVMSnapshotBeforeChange (issue 34): with snapshotBeforeChange an
// in-place change of a VM app is protected by a snapshot (the plan says
// so): one that succeeds leaves no snapshot behind; one that fails (the
// VM, now on DHCP, reports no address through its agent) is rolled back,
// and the VM runs on the config it had before.
func TestVMSnapshotBeforeChange(t *testing.T) {
	t.Parallel()
	c, _ := vmBackupCluster(t)
	extra := "    snapshotBeforeChange: true\n"
	m := vmAppManifest(t, "10.20.0.50/24", ", addressWait: 1s", extra)
	c.mustRun("apply", "-f", m, "--auto-approve")
	vmid, _, _ := c.vmOf(m)
	ctx := context.Background()
	root := c.pveRoot()
	m2 := writeManifest(t, strings.Replace(vmAppText("10.20.0.50/24", ", addressWait: 1s", extra), "memory: 1024", "memory: 2048", 1))
	if r := c.run("plan", "-f", m2); r.code != ExitChanges || !strings.Contains(r.stdout, "snapshotBeforeChange: a snapshot of the VM first") {
		t.Fatalf("plan of a protected change: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r := c.mustRun("apply", "-f", m2, "--auto-approve")
	if !strings.Contains(r.stderr, "corral_pre_") {
		t.Errorf("apply took no snapshot:\n%s", r.stderr)
	}
	if n := c.vmSnapshots(vmid); n != 0 {
		t.Errorf("%d snapshots left after a change that succeeded", n)
	}
	// The token may ask the agent for addresses (the apply's preflight
	// wants it for a VM on DHCP), which it then does not report.
	if err := root.Put(ctx, "/access/roles/CorralOperator", url.Values{"privs": {"VM.GuestAgent.Audit"}, "append": {"1"}}, nil); err != nil {
		t.Fatal(err)
	}
	m3 := vmAppManifest(t, "dhcp", ", addressWait: 1s", extra)
	r = c.run("apply", "-f", m3, "--auto-approve")
	if r.code == 0 || !strings.Contains(r.stderr, "rolled back to snapshot corral_pre_") {
		t.Fatalf("apply of a failing change: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	conf, err := root.VMConfigOf(ctx, "pve", vmid, true)
	if err != nil {
		t.Fatal(err)
	}
	if conf.Values["ipconfig0"] != "ip=10.20.0.50/24,gw=10.20.0.1" || conf.Values["memory"] != "2048" {
		t.Errorf("after the rollback: ipconfig0 %q memory %q, want the config before the change", conf.Values["ipconfig0"], conf.Values["memory"])
	}
	if st, err := root.VMStatusOf(ctx, "pve", vmid); err != nil || st.Status != "running" {
		t.Errorf("after the rollback: %+v %v, want running", st, err)
	}
	if n := c.vmSnapshots(vmid); n != 0 {
		t.Errorf("%d snapshots left after the rollback", n)
	}
	if r := c.run("plan", "-f", m2); r.code != 0 {
		t.Errorf("plan of the config before the change: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// vmSnapshots counts VM vmid's snapshots ("current" is not one).
func (c *cluster) vmSnapshots(vmid int) int {
	c.t.Helper()
	var snaps []pve.Snapshot
	if err := c.pveRoot().Get(context.Background(), "/nodes/pve/qemu/"+strconv.Itoa(vmid)+"/snapshot", nil, &snaps); err != nil {
		c.t.Fatal(err)
	}
	return len(snaps) - 1
}

// TestVMScheduledBackup (issue 34): corral agent backs a VM app up on
// its backup.schedule as it does a container, and its event says the
// archive is app-consistent (the agent froze the guest's filesystems).
func TestVMScheduledBackup(t *testing.T) {
	t.Parallel()
	c, rt := vmBackupCluster(t)
	m := vmAppManifest(t, "10.20.0.50/24", "", "    backup: {keep: 1, schedule: \"@every 24h\"}\n")
	c.mustRun("apply", "-f", m, "--auto-approve")
	vmid, _, _ := c.vmOf(m)
	r := c.newAgentRig(m, "observe", time.Now(), nil)
	r.tick()
	got := c.archives(m, "web")
	if len(got) != 1 || !strings.Contains(got[0], "vzdump-qemu-"+strconv.Itoa(vmid)+"-") {
		t.Fatalf("archives after the agent's round = %v, want one of vm %d\n%s", got, vmid, r.stderr)
	}
	ev := r.events(agent.KindBackup, 0)
	if len(ev) != 1 || ev[0].Level != "info" || !strings.Contains(ev[0].Message, got[0]) || !strings.Contains(ev[0].Message, apply.ConsistentApp) {
		t.Fatalf("backup events: %+v", ev)
	}
	if calls := rt.Calls(vmid); !slices.Contains(calls, "fsfreeze-freeze") || !slices.Contains(calls, "fsfreeze-thaw") {
		t.Errorf("agent calls of vm %d: %q, want a freeze and a thaw", vmid, calls)
	}
}

// fileDigest is a SHA-256 of the bytes of the file at path that reads
// only its data extents (SEEK_DATA/SEEK_HOLE): each 64 KiB block holding
// a non-zero byte is hashed with its offset, so two files with the same
// bytes have the same digest however sparse each one is. A VM's disk is
// 2 GiB holding a few MB: read whole it took the test binary's memory to
// 24 GB in CI, and read as a stream 30 CPU-seconds under -race.
func fileDigest(t *testing.T, path string) [sha256.Size]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	const block = 64 << 10
	h := sha256.New()
	fmt.Fprintf(h, "size %d\n", fi.Size())
	buf, zero := make([]byte, block), make([]byte, block)
	next := int64(0) // the first block not hashed yet
	for off := int64(0); off < fi.Size(); {
		data, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole is left
		}
		if err != nil {
			t.Fatalf("%s: SEEK_DATA: %v", path, err)
		}
		hole, err := unix.Seek(int(f.Fd()), data, unix.SEEK_HOLE)
		if err != nil {
			t.Fatalf("%s: SEEK_HOLE: %v", path, err)
		}
		for b := max(next, data/block*block); b < hole; b += block {
			n, err := f.ReadAt(buf, b)
			if err != nil && !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			if !bytes.Equal(buf[:n], zero[:n]) {
				fmt.Fprintf(h, "block %d\n", b)
				h.Write(buf[:n])
			}
			next = b + block
		}
		off = hole
	}
	return [sha256.Size]byte(h.Sum(nil))
}

// TestFileDigest: the digest TestVMRestore compares disks by sees every
// byte, whether a block of zeros is written out or left a hole.
func TestFileDigest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name string, zeros bool, data string) string {
		p := dir + "/" + name
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := f.Truncate(8 << 20); err != nil {
			t.Fatal(err)
		}
		if zeros { // the first MiB written out, not a hole
			if _, err := f.WriteAt(make([]byte, 1<<20), 0); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := f.WriteAt([]byte(data), 3<<20+5); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sparse, dense := write("sparse", false, "corral"), write("dense", true, "corral")
	if fileDigest(t, sparse) != fileDigest(t, dense) {
		t.Error("the same bytes, one with a hole where the other has zeros: digests differ")
	}
	if fileDigest(t, sparse) == fileDigest(t, write("other", false, "corrak")) {
		t.Error("a changed byte: the digests are equal")
	}
}
