package model

import (
	"strings"
	"testing"
)

// TestDiskUsage_cached: a running CT's disk figure comes from memory, the
// same in /cluster/resources and status/current; a file written into its
// rootfs shows after the next measurement, and a new boot is measured
// afresh.
func TestDiskUsage_cached(t *testing.T) {
	t.Parallel()
	k := newOpsKit(t)
	k.ct("pve", 101, nil)
	k.run(k.c.StartCT(kitRoot, "pve", 101, nil))
	disk := func() (resources, status int64) {
		t.Helper()
		for _, r := range k.c.Resources("vm") {
			if r.VMID == 101 {
				resources = r.Disk
			}
		}
		s, err := k.c.CTStatus("pve", 101)
		if err != nil {
			t.Fatal(err)
		}
		return resources, s.Disk
	}
	r0, s0 := disk()
	if r0 != s0 {
		t.Fatalf("resources say %d bytes, status %d", r0, s0)
	}
	k.writeFile("pve", "local-lvm:vm-101-disk-0", "srv/big", strings.Repeat("x", 10000))
	if r, s := disk(); r != r0 || s != s0 {
		t.Errorf("figures changed to %d/%d without a measurement: a request walked the rootfs", r, s)
	}
	k.c.measureDiskUsage()
	if r, s := disk(); r != r0+10000 || s != s0+10000 {
		t.Errorf("after a measurement: %d/%d, want %d", r, s, r0+10000)
	}
	// A reboot is a new PID: measured again at once.
	k.writeFile("pve", "local-lvm:vm-101-disk-0", "srv/more", strings.Repeat("y", 500))
	k.run(k.c.RebootCT(kitRoot, "pve", 101, nil))
	if r, s := disk(); r != r0+10500 || s != s0+10500 {
		t.Errorf("after a reboot: %d/%d, want %d", r, s, r0+10500)
	}
	// A stopped CT is forgotten by the next measurement.
	k.run(k.c.StopCT(kitRoot, "pve", 101, nil))
	k.c.measureDiskUsage()
	k.c.du.mu.Lock()
	_, kept := k.c.du.m[101]
	k.c.du.mu.Unlock()
	if kept {
		t.Error("the cache still holds the stopped CT")
	}
}
