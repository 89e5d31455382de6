package pve_test

import (
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/pve"
)

// TestVMDiskReassignEncode: the target is always sent, the target key
// and both digests only when set; a forced delete says force=1.
func TestVMDiskReassignEncode(t *testing.T) {
	for _, tc := range []struct {
		m    pve.VMDiskReassign
		want url.Values
	}{
		{pve.VMDiskReassign{Disk: "scsi1", TargetVMID: 900}, url.Values{"disk": {"scsi1"}, "target-vmid": {"900"}}},
		{pve.VMDiskReassign{Disk: "scsi1", TargetVMID: 900, TargetDisk: "scsi4", Digest: "a", TargetDigest: "b"},
			url.Values{"disk": {"scsi1"}, "target-vmid": {"900"}, "target-disk": {"scsi4"}, "digest": {"a"}, "target-digest": {"b"}}},
	} {
		if d := cmp.Diff(tc.want, tc.m.Encode()); d != "" {
			t.Errorf("encode %+v (-want +got):\n%s", tc.m, d)
		}
	}
	u := pve.VMConfigUpdate{Delete: []string{"scsi3"}, Force: true}
	if d := cmp.Diff(url.Values{"delete": {"scsi3"}, "force": {"1"}}, u.Encode()); d != "" {
		t.Errorf("forced delete (-want +got):\n%s", d)
	}
}
