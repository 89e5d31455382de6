package schema_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/sim/schema"
)

func mustParam(t testing.TB, version, verb, path, name string) *schema.Param {
	t.Helper()
	m := mustMethod(t, mustLoad(t, version), verb, path)
	p := m.Param(name)
	if p == nil {
		t.Fatalf("%s %s has no parameter %q", verb, path, name)
	}
	return p
}

func TestParam_ParseProperty(t *testing.T) {
	const config = "/nodes/pve/lxc/101/config"
	tests := []struct {
		name    string
		qemu    bool
		param   string
		value   string
		want    map[string]string
		wantErr string
	}{
		{
			name:  "mount point with default key",
			param: "mp0",
			value: "local-lvm:vm-101-disk-1,mp=/data,backup=1,size=8G",
			want:  map[string]string{"volume": "local-lvm:vm-101-disk-1", "mp": "/data", "backup": "1", "size": "8G"},
		},
		{
			name:  "explicit default key, booleans normalized, blank parts skipped",
			param: "mp12",
			value: "volume=local:8, ,mp=/srv,ro=yes,acl=OFF,",
			want:  map[string]string{"volume": "local:8", "mp": "/srv", "ro": "1", "acl": "0"},
		},
		{
			name:  "network interface",
			param: "net3",
			value: "name=eth3,bridge=vmbr0,ip=192.0.2.10/24,gw=192.0.2.1,firewall=true",
			want:  map[string]string{"name": "eth3", "bridge": "vmbr0", "ip": "192.0.2.10/24", "gw": "192.0.2.1", "firewall": "1"},
		},
		{
			name:  "alias key stores under its target",
			qemu:  true,
			param: "scsi0",
			value: "volume=local-lvm:vm-100-disk-0,size=32G",
			want:  map[string]string{"file": "local-lvm:vm-100-disk-0", "size": "32G"},
		},
		{
			name:  "keyAlias key records the key under its keyAlias",
			qemu:  true,
			param: "net0",
			value: "virtio=BC:24:11:00:00:01,bridge=vmbr0",
			want:  map[string]string{"model": "virtio", "macaddr": "BC:24:11:00:00:01", "bridge": "vmbr0"},
		},
		{
			// The duplicate check looks at the key as written, before the
			// alias is applied, so the later value wins (as in PVE).
			name:  "alias after its target overwrites it",
			qemu:  true,
			param: "net0",
			value: "macaddr=BC:24:11:00:00:01,virtio=BC:24:11:00:00:02",
			want:  map[string]string{"model": "virtio", "macaddr": "BC:24:11:00:00:02"},
		},
		{
			name:    "target after its alias is a duplicate",
			qemu:    true,
			param:   "net0",
			value:   "virtio=BC:24:11:00:00:01,macaddr=BC:24:11:00:00:02",
			wantErr: "duplicate key in comma-separated list property: macaddr",
		},
		{
			name:    "second model alias",
			qemu:    true,
			param:   "net0",
			value:   "virtio=BC:24:11:00:00:01,e1000=BC:24:11:00:00:02",
			wantErr: "key alias 'model' is already defined",
		},
		{
			name:    "missing required key, error path uses the asked name",
			param:   "mp7",
			value:   "local:8",
			wantErr: "format error\nmp7.mp: property is missing and it is not optional",
		},
		{
			name:    "key without value",
			param:   "mp0",
			value:   "local:8,mp=",
			wantErr: "missing key in comma-separated list property",
		},
		{
			name:    "value without key where there is no default key",
			param:   "features",
			value:   "nesting",
			wantErr: "value without key, but schema does not define a default key",
		},
		{
			name:    "default key given twice",
			param:   "mp0",
			value:   "volume=local:8,local:9,mp=/x",
			wantErr: "duplicate key in comma-separated list property: volume",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := config
			if tt.qemu {
				path = "/nodes/pve/qemu/100/config"
			}
			p := mustParam(t, "9.1", "PUT", path, tt.param)
			got, err := p.ParseProperty(tt.value)
			if tt.wantErr != "" {
				var fe *schema.FormatError
				if !errors.As(err, &fe) {
					t.Fatalf("ParseProperty(%q) err=%v, want *schema.FormatError", tt.value, err)
				}
				if got := err.Error(); got != tt.wantErr {
					t.Errorf("ParseProperty(%q) err=%q, want %q", tt.value, got, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseProperty(%q): %v", tt.value, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseProperty(%q) (-want +got):\n%s", tt.value, diff)
			}
		})
	}
}

func TestParam_ParseProperty_notPropertyString(t *testing.T) {
	p := mustParam(t, "9.1", "PUT", "/nodes/pve/lxc/101/config", "hostname")
	if _, err := p.ParseProperty("web"); err == nil {
		t.Fatal("ParseProperty on hostname succeeded, want an error")
	}
}

func TestPrintProperty(t *testing.T) {
	mp := mustParam(t, "9.1", "PUT", "/nodes/pve/lxc/101/config", "mp0").PropertyFormat
	net := mustParam(t, "9.1", "PUT", "/nodes/pve/lxc/101/config", "net0").PropertyFormat
	qnet := mustParam(t, "9.1", "PUT", "/nodes/pve/qemu/100/config", "net0").PropertyFormat
	tests := []struct {
		name   string
		format *schema.Format
		kv     map[string]string
		want   string
	}{
		{
			name:   "default key, then required mp, then the rest sorted (behaviour.md §f)",
			format: mp,
			kv:     map[string]string{"size": "8G", "backup": "1", "mp": "/data", "volume": "local-lvm:vm-101-disk-1"},
			want:   "local-lvm:vm-101-disk-1,mp=/data,backup=1,size=8G",
		},
		{
			name:   "sizes are normalized like format_size",
			format: mp,
			kv:     map[string]string{"volume": "local:1", "mp": "/a", "size": "8589934592"},
			want:   "local:1,mp=/a,size=8G",
		},
		{
			name:   "required name first, no default key",
			format: net,
			kv:     map[string]string{"type": "veth", "ip": "dhcp", "hwaddr": "BC:24:11:5E:7A:01", "firewall": "1", "bridge": "vmbr0", "name": "eth0"},
			want:   "name=eth0,bridge=vmbr0,firewall=1,hwaddr=BC:24:11:5E:7A:01,ip=dhcp,type=veth",
		},
		{
			name:   "keyAlias pair printed combined",
			format: qnet,
			kv:     map[string]string{"model": "virtio", "macaddr": "BC:24:11:00:00:01", "bridge": "vmbr0"},
			want:   "virtio=BC:24:11:00:00:01,bridge=vmbr0",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := schema.PrintProperty(tt.format, tt.kv); got != tt.want {
				t.Errorf("PrintProperty()=%q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseThenPrint_roundTrip(t *testing.T) {
	tests := []struct {
		param string
		in    string
		want  string
	}{
		{"mp0", "local-lvm:vm-101-disk-1,mp=/data,backup=1,size=8G", "local-lvm:vm-101-disk-1,mp=/data,backup=1,size=8G"},
		{"mp0", "size=8192M,backup=yes,mp=/data,volume=local-lvm:vm-101-disk-1", "local-lvm:vm-101-disk-1,mp=/data,backup=1,size=8G"},
		{"rootfs", "local-lvm:vm-101-disk-0,size=8G", "local-lvm:vm-101-disk-0,size=8G"},
		{"rootfs", "local-lvm:vm-101-disk-0,size=1536M,mountoptions=noatime;nodev", "local-lvm:vm-101-disk-0,mountoptions=noatime;nodev,size=1536M"},
		{"net0", "type=veth,ip=dhcp,name=eth0,bridge=vmbr0", "name=eth0,bridge=vmbr0,ip=dhcp,type=veth"},
		{"features", "nesting=1,keyctl=0", "keyctl=0,nesting=1"},
		{"unused3", "local-lvm:vm-900-disk-2", "local-lvm:vm-900-disk-2"},
	}
	for _, tt := range tests {
		t.Run(tt.param+" "+tt.in, func(t *testing.T) {
			p := mustParam(t, "9.1", "PUT", "/nodes/pve/lxc/101/config", tt.param)
			kv, err := p.ParseProperty(tt.in)
			if err != nil {
				t.Fatalf("ParseProperty(%q): %v", tt.in, err)
			}
			got := schema.PrintProperty(p.PropertyFormat, kv)
			if got != tt.want {
				t.Errorf("PrintProperty(ParseProperty(%q))=%q, want %q", tt.in, got, tt.want)
			}
			again, err := p.ParseProperty(got)
			if err != nil {
				t.Fatalf("ParseProperty(%q) of printed form: %v", got, err)
			}
			if schema.PrintProperty(p.PropertyFormat, again) != got {
				t.Errorf("printing %q is not stable", got)
			}
		})
	}
}

func TestParseBoolean(t *testing.T) {
	for in, want := range map[string]string{
		"1": "1", "on": "1", "YES": "1", "True": "1",
		"0": "0", "off": "0", "No": "0", "FALSE": "0",
	} {
		if got, ok := schema.ParseBoolean(in); !ok || got != want {
			t.Errorf("ParseBoolean(%q)=%q,%v, want %q,true", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "2", "y", "enabled"} {
		if got, ok := schema.ParseBoolean(in); ok {
			t.Errorf("ParseBoolean(%q)=%q,true, want not ok", in, got)
		}
	}
}
