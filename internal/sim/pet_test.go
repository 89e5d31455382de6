package sim

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPetCattleFlow drives the placeholder-owner pattern over HTTPS and
// checks the data plane on disk: a keeper CT owns the pet volume, the
// workload uses it, a mount point moves between CTs while stopped, and
// destroying CTs frees exactly the volumes named for them.
func TestPetCattleFlow(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	op := k.op()
	lxc := func(vmid string, rest string) string { return "/nodes/pve/lxc/" + vmid + rest }

	// Keeper 900: its mp0 becomes unused0 when detached while stopped.
	k.create(op, "900", url.Values{"mp0": {"local-lvm:1,mp=/pet"}})
	pet := "local-lvm:vm-900-disk-1"
	if got := k.config("900", false)["mp0"]; got != pet+",mp=/pet,size=1G" {
		t.Fatalf("keeper mp0 = %v", got)
	}
	k.ok(op, http.MethodPut, lxc("900", "/config"), url.Values{"delete": {"mp0"}}, nil)
	k.ok(op, http.MethodPut, lxc("900", "/config"), url.Values{"protection": {"1"}}, nil)
	if got := k.config("900", false)["unused0"]; got != pet {
		t.Fatalf("keeper unused0 = %v, want %s", got, pet)
	}
	petFile := k.writeVolumeFile(pet, "precious.txt", "pet data")

	k.create(op, "101", url.Values{"mp1": {"local-lvm:1,mp=/scratch"}})
	k.create(op, "102", nil)

	// An unused volume cannot be handed over as a used one (PVE forbids
	// unusedN -> mpN); the workload attaches the pet by PUT config.
	r := k.do(op, http.MethodPost, lxc("900", "/move_volume"), url.Values{"volume": {"unused0"}, "target-vmid": {"101"}, "target-volume": {"mp0"}})
	if r.status != 500 || r.msg != "Moving an unused volume to a used one is not possible\n" {
		t.Errorf("unused0 -> mp0: %d %q", r.status, r.msg)
	}
	k.ok(op, http.MethodPut, lxc("101", "/config"), url.Values{"mp0": {pet + ",mp=/data,backup=1,size=99G"}}, nil)
	if got := k.config("101", false)["mp0"]; got != pet+",mp=/data,backup=1,size=1G" {
		t.Errorf("workload mp0 = %v (size must be rescanned from storage)", got)
	}
	if got := k.config("900", false)["unused0"]; got != pet {
		t.Errorf("keeper lost its unused0: %v", got)
	}
	// Pets are resized through their owner only; the die has no newline,
	// so Perl appends where it happened.
	r = k.do(op, http.MethodPut, lxc("101", "/resize"), url.Values{"disk": {"mp0"}, "size": {"+1G"}})
	if r.status != 500 || !strings.HasPrefix(r.msg, "can't resize mount point owned by another container (900) at /usr/share/perl5/PVE/API2/LXC.pm line ") || !strings.HasSuffix(r.msg, ".\n") {
		t.Errorf("resize of the pet through the workload: %d %q", r.status, r.msg)
	}

	// move_volume of a workload's own mount point to another CT, as mpN,
	// while stopped: the volume is renamed for the target and its data goes along.
	scratch := "local-lvm:vm-101-disk-1"
	scratchFile := k.writeVolumeFile(scratch, "s.txt", "scratch")
	k.mustOK(op, http.MethodPost, lxc("101", "/status/start"), nil)
	r = k.do(op, http.MethodPost, lxc("101", "/move_volume"), url.Values{"volume": {"mp1"}, "target-vmid": {"102"}, "target-volume": {"mp0"}})
	if r.status != 500 || r.msg != "Cannot move in-use volume while the source CT is running - detach or shutdown first\n" {
		t.Errorf("move from a running CT: %d %q", r.status, r.msg)
	}
	k.mustOK(op, http.MethodPost, lxc("101", "/status/stop"), nil)
	mv := k.mustOK(op, http.MethodPost, lxc("101", "/move_volume"), url.Values{"volume": {"mp1"}, "target-vmid": {"102"}, "target-volume": {"mp0"}})
	if mv.Type != "move_volume" || mv.ID != "101-mp1>102-mp0" {
		t.Errorf("move task %s:%s, want move_volume:101-mp1>102-mp0", mv.Type, mv.ID)
	}
	moved := "local-lvm:vm-102-disk-1"
	if got := k.config("102", false)["mp0"]; !strings.HasPrefix(fmt.Sprint(got), moved+",mp=/scratch") {
		t.Errorf("target mp0 = %v, want %s,mp=/scratch…", got, moved)
	}
	if _, ok := k.config("101", false)["mp1"]; ok {
		t.Error("source still has mp1 after the move")
	}
	if _, err := os.Stat(scratchFile); !os.IsNotExist(err) {
		t.Errorf("old volume's file still at %s (%v)", scratchFile, err)
	}
	if got := k.readVolumeFile(moved, "s.txt"); got != "scratch" {
		t.Errorf("moved volume's data = %q", got)
	}

	// Destroying the workload frees its own volumes, warns about the pet
	// and leaves it alone.
	own := k.volumeFiles("101")
	if len(own) == 0 {
		t.Fatal("no vm-101-disk-* files on disk before the destroy")
	}
	d := k.mustOK(op, http.MethodDelete, lxc("101", ""), url.Values{"purge": {"1"}})
	if !slices.Contains(d.log, "WARN: ignore deletion of '"+pet+"', CT 101 isn't the owner!") &&
		!slices.Contains(d.log, "ignore deletion of '"+pet+"', CT 101 isn't the owner!") {
		t.Errorf("destroy log lacks the isn't-the-owner warning:\n%s", strings.Join(d.log, "\n"))
	}
	if got := k.readVolumeFile(pet, "precious.txt"); got != "pet data" {
		t.Errorf("pet data after destroying the workload = %q", got)
	}
	if _, err := os.Stat(petFile); err != nil {
		t.Errorf("pet file: %v", err)
	}
	if left := k.volumeFiles("101"); len(left) != 0 {
		t.Errorf("vm-101-disk-* still on disk after destroy: %v", left)
	}
	var content []struct {
		VolID string `json:"volid"`
	}
	k.ok(op, http.MethodGet, "/nodes/pve/storage/local-lvm/content", nil, &content)
	for _, c := range content {
		if strings.Contains(c.VolID, "vm-101-") {
			t.Errorf("storage still lists %s", c.VolID)
		}
	}

	// The keeper is protected; the other CT's destroy frees what it owns,
	// including the volume it received.
	if r := k.do(op, http.MethodDelete, lxc("900", ""), nil); r.status != 500 || r.msg != "can't remove CT 900 - protection mode enabled\n" {
		t.Errorf("keeper destroy: %d %q", r.status, r.msg)
	}
	k.mustOK(op, http.MethodDelete, lxc("102", ""), nil)
	if left := k.volumeFiles("102"); len(left) != 0 {
		t.Errorf("vm-102-disk-* still on disk: %v", left)
	}
	if got := k.readVolumeFile(pet, "precious.txt"); got != "pet data" {
		t.Errorf("pet data at the end = %q", got)
	}
}

// volumeDir is where a volume's data lives under the state directory.
func (k *e2e) volumeDir(volid string) string {
	k.t.Helper()
	p, err := k.srv.Cluster().VolumePath("pve", volid)
	if err != nil {
		k.t.Fatalf("volume path of %s: %v", volid, err)
	}
	if !strings.HasPrefix(p, k.dir) {
		k.t.Fatalf("volume %s lives at %s, outside the state directory %s", volid, p, k.dir)
	}
	return p
}

func (k *e2e) writeVolumeFile(volid, name, data string) string {
	k.t.Helper()
	p := filepath.Join(k.volumeDir(volid), name)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		k.t.Fatal(err)
	}
	return p
}

func (k *e2e) readVolumeFile(volid, name string) string {
	k.t.Helper()
	b, err := os.ReadFile(filepath.Join(k.volumeDir(volid), name))
	if err != nil {
		k.t.Errorf("read %s in %s: %v", name, volid, err)
	}
	return string(b)
}

// volumeFiles lists vm-<vmid>-disk-* entries anywhere under the state
// directory's data plane.
func (k *e2e) volumeFiles(vmid string) []string {
	k.t.Helper()
	var out []string
	filepath.WalkDir(filepath.Join(k.dir, "data"), func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), "vm-"+vmid+"-disk-") {
			out = append(out, p)
			if d.IsDir() {
				return filepath.SkipDir
			}
		}
		return nil
	})
	return out
}
