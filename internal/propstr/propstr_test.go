package propstr_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/propstr"
)

func TestParseMountPoint(t *testing.T) {
	gib8 := int64(8 << 30)
	tests := []struct {
		name  string
		in    string
		want  propstr.MountPoint
		print string // String(); "" = same as in
	}{
		{name: "fixture mp0", in: "local-lvm:vm-900-disk-1,mp=/srv/data,backup=1,size=8G",
			want: propstr.MountPoint{Volume: "local-lvm:vm-900-disk-1", Path: "/srv/data", Backup: new(true), Size: &gib8}},
		{name: "rootfs", in: "local-lvm:vm-101-disk-0,size=8G",
			want: propstr.MountPoint{Volume: "local-lvm:vm-101-disk-0", Size: &gib8}},
		{name: "normalized order and size", in: "size=8192M,ro=0,mp=/data,volume=local-lvm:vm-101-disk-1,backup=yes",
			want:  propstr.MountPoint{Volume: "local-lvm:vm-101-disk-1", Path: "/data", Backup: new(true), RO: new(false), Size: &gib8},
			print: "local-lvm:vm-101-disk-1,mp=/data,backup=1,ro=0,size=8G"},
		{name: "new volume", in: "local-lvm:8,mp=/home/hermes",
			want: propstr.MountPoint{Volume: "local-lvm:8", Path: "/home/hermes"}},
		{name: "every option", in: "/mnt/host,mp=/mnt/ct,acl=1,backup=0,keepattrs=1,mountoptions=noatime;nodev,quota=1,replicate=0,ro=1,shared=1,size=512M",
			want: propstr.MountPoint{Volume: "/mnt/host", Path: "/mnt/ct", ACL: new(true), Backup: new(false), KeepAttrs: new(true),
				MountOptions: []string{"noatime", "nodev"}, Quota: new(true), Replicate: new(false), RO: new(true), Shared: new(true), Size: new(int64(512 << 20))}},
		{name: "unknown key kept", in: "local-lvm:vm-101-disk-1,mp=/data,idmap=passthrough,backup=1",
			want:  propstr.MountPoint{Volume: "local-lvm:vm-101-disk-1", Path: "/data", Backup: new(true), Extra: map[string]string{"idmap": "passthrough"}},
			print: "local-lvm:vm-101-disk-1,mp=/data,backup=1,idmap=passthrough"},
		{name: "odd size stays bytes", in: "local:0,mp=/x,size=1000",
			want: propstr.MountPoint{Volume: "local:0", Path: "/x", Size: new(int64(1000))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := propstr.ParseMountPoint(tt.in)
			if err != nil {
				t.Fatalf("ParseMountPoint: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseMountPoint (-want +got):\n%s", diff)
			}
			want := tt.print
			if want == "" {
				want = tt.in
			}
			if got := got.String(); got != want {
				t.Errorf("String()=%q, want %q", got, want)
			}
		})
	}
}

func TestParseMountPoint_errors(t *testing.T) {
	for _, in := range []string{
		"",
		"mp=/data",
		"local-lvm:vm-1-disk-0,local-lvm:vm-1-disk-1",
		"local-lvm:vm-1-disk-0,mp=/a,mp=/b",
		"local-lvm:vm-1-disk-0,backup=maybe",
		"local-lvm:vm-1-disk-0,size=8X",
		"local-lvm:vm-1-disk-0,=x",
		"local-lvm:vm-1-disk-0,mp=",
	} {
		if mp, err := propstr.ParseMountPoint(in); err == nil {
			t.Errorf("ParseMountPoint(%q) = %+v, want error", in, mp)
		}
	}
}

func TestMountPoint_kinds(t *testing.T) {
	tests := []struct {
		volume       string
		bind, device bool
		storage      string
		newStorage   string
		newGiB       float64
	}{
		{volume: "local-lvm:vm-900-disk-1", storage: "local-lvm"},
		{volume: "local-lvm:8", storage: "local-lvm", newStorage: "local-lvm", newGiB: 8},
		{volume: "local-lvm:0.5", storage: "local-lvm", newStorage: "local-lvm", newGiB: 0.5},
		{volume: "/srv/host", bind: true},
		{volume: "/dev/sdb1", device: true},
	}
	for _, tt := range tests {
		t.Run(tt.volume, func(t *testing.T) {
			m := propstr.MountPoint{Volume: tt.volume}
			sid, gib, isNew := m.NewVolume()
			got := []any{m.IsBindMount(), m.IsDeviceMount(), m.StorageID(), sid, gib, isNew}
			want := []any{tt.bind, tt.device, tt.storage, tt.newStorage, tt.newGiB, tt.newStorage != ""}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("bind, device, storage, new (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseNetDevice(t *testing.T) {
	tests := []struct {
		name  string
		in    string
		want  propstr.NetDevice
		print string
	}{
		{name: "fixture net0", in: "name=eth0,bridge=vmbr0,firewall=1,hwaddr=BC:24:11:5E:7A:01,ip=dhcp,type=veth",
			want: propstr.NetDevice{Name: "eth0", Bridge: "vmbr0", Firewall: new(true), HWAddr: "BC:24:11:5E:7A:01", IP: "dhcp", Type: "veth"}},
		{name: "normalized", in: "type=veth,ip6=auto,tag=20,ip=10.0.0.5/24,gw=10.0.0.1,mtu=1400,rate=12.5,link_down=0,name=eth1,bridge=vmbr1,trunks=10;20",
			want: propstr.NetDevice{Name: "eth1", Bridge: "vmbr1", GW: "10.0.0.1", IP: "10.0.0.5/24", IP6: "auto", LinkDown: new(false),
				MTU: new(1400), Rate: new(12.5), Tag: new(20), Trunks: "10;20", Type: "veth"},
			print: "name=eth1,bridge=vmbr1,gw=10.0.0.1,ip=10.0.0.5/24,ip6=auto,link_down=0,mtu=1400,rate=12.5,tag=20,trunks=10;20,type=veth"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := propstr.ParseNetDevice(tt.in)
			if err != nil {
				t.Fatalf("ParseNetDevice: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseNetDevice (-want +got):\n%s", diff)
			}
			want := tt.print
			if want == "" {
				want = tt.in
			}
			if got := got.String(); got != want {
				t.Errorf("String()=%q, want %q", got, want)
			}
		})
	}
	for _, bad := range []string{"bridge=vmbr0", "eth0", "name=eth0,mtu=big", "name=eth0,firewall=2"} {
		if _, err := propstr.ParseNetDevice(bad); err == nil {
			t.Errorf("ParseNetDevice(%q) succeeded, want error", bad)
		}
	}
}
