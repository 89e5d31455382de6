package plan_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/plan"
)

func TestCT_Mounts(t *testing.T) {
	conf := map[string]string{
		"rootfs":  "local-lvm:vm-101-disk-0,size=8G",
		"mp10":    "local-lvm:vm-900-disk-3,mp=/srv/b,backup=1",
		"mp2":     "local-lvm:vm-900-disk-1,mp=/srv/a,backup=0",
		"unused0": "local-lvm:vm-101-disk-9",
		"mpx":     "not a mount key",
	}
	want := []plan.KeyedMount{
		{Key: "mp2", MountPoint: plan.MountPoint{Volume: "local-lvm:vm-900-disk-1", Path: "/srv/a"}},
		{Key: "mp10", MountPoint: plan.MountPoint{Volume: "local-lvm:vm-900-disk-3", Path: "/srv/b", Backup: true}},
	}
	for _, tt := range []struct {
		name  string
		parse bool
	}{{"parsed on demand", false}, {"parsed once", true}} {
		t.Run(tt.name, func(t *testing.T) {
			ct := &plan.CT{VMID: 101, Config: conf}
			if tt.parse {
				ct.ParseMounts()
			}
			if diff := cmp.Diff(want, ct.Mounts()); diff != "" {
				t.Errorf("Mounts() (-want +got):\n%s", diff)
			}
			if got, want := ct.RootFS(), (plan.MountPoint{Volume: "local-lvm:vm-101-disk-0", Size: "8G"}); got != want {
				t.Errorf("RootFS()=%+v, want %+v", got, want)
			}
		})
	}
	if got := (&plan.CT{}).Mounts(); len(got) != 0 {
		t.Errorf("Mounts() of an empty config = %v", got)
	}
}
