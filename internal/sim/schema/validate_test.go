package schema_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/sim/schema"
)

func mustLoad(t testing.TB, version string) *schema.API {
	t.Helper()
	a, err := schema.Load(version)
	if err != nil {
		t.Fatalf("Load(%q): %v", version, err)
	}
	return a
}

func mustMethod(t testing.TB, a *schema.API, verb, path string) *schema.Method {
	t.Helper()
	m, _, ok := a.Lookup(verb, path)
	if !ok {
		t.Fatalf("Lookup(%s %s) found nothing", verb, path)
	}
	return m
}

// validationErrors runs Validate and returns the per-parameter messages,
// nil when the parameters are valid.
func validationErrors(t *testing.T, m *schema.Method, params map[string]string) map[string]string {
	t.Helper()
	err := m.Validate(params)
	if err == nil {
		return nil
	}
	var pe *schema.ParamError
	if !errors.As(err, &pe) {
		t.Fatalf("Validate returned %T %v, want *schema.ParamError", err, err)
	}
	return pe.Errors
}

func with(base map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

func TestMethod_Validate(t *testing.T) {
	a := mustLoad(t, "9.1")
	putConfig := mustMethod(t, a, "PUT", "/nodes/pve/lxc/101/config")
	create := mustMethod(t, a, "POST", "/nodes/pve/lxc")
	content := mustMethod(t, a, "GET", "/nodes/pve/storage/local/content")
	roles := mustMethod(t, a, "POST", "/access/roles")
	token := mustMethod(t, a, "POST", "/access/users/u@pve/token/t1")
	ct := map[string]string{"node": "pve", "vmid": "101"}
	newCT := map[string]string{"node": "pve", "vmid": "200", "ostemplate": "local:vztmpl/debian-12.tar.zst"}

	tests := []struct {
		name   string
		method *schema.Method
		params map[string]string
		want   map[string]string
	}{
		{
			name:   "valid config update",
			method: putConfig,
			params: with(ct,
				"mp0", "local-lvm:vm-900-disk-1,mp=/srv/data,backup=1,size=8G",
				"rootfs", "local-lvm:8",
				"net0", "name=eth0,bridge=vmbr0,firewall=1,hwaddr=BC:24:11:5E:7A:01,ip=dhcp,type=veth",
				"features", "nesting=1,keyctl=yes",
				"tags", "app;web",
				"nameserver", "192.0.2.53 fe80::1%eth0",
				"delete", "mp1,unused0",
				"onboot", "1",
				"cpulimit", "1.5",
				"unused255", "local-lvm:vm-101-disk-9",
			),
		},
		{
			name:   "missing required parameter",
			method: create,
			params: map[string]string{"node": "pve", "vmid": "200"},
			want:   map[string]string{"ostemplate": "property is missing and it is not optional"},
		},
		{
			name:   "property string lacks a required key (fixture error-400-param.json)",
			method: putConfig,
			params: with(ct, "mp0", "local-lvm:8"),
			want:   map[string]string{"mp0": "invalid format - format error\nmp0.mp: property is missing and it is not optional\n"},
		},
		{
			name:   "regex pattern",
			method: create,
			params: with(newCT, "entrypoint", "/sbin/init\x01"),
			want:   map[string]string{"entrypoint": "value does not match the regex pattern"},
		},
		{
			name:   "regex pattern inside a property string",
			method: putConfig,
			params: with(ct, "features", "mount=nfs!"),
			want:   map[string]string{"features": "invalid format - format error\nfeatures.mount: value does not match the regex pattern\n"},
		},
		{
			name:   "enumeration",
			method: putConfig,
			params: with(ct, "ostype", "windows"),
			want: map[string]string{"ostype": "value 'windows' does not have a value in the enumeration " +
				"'debian, devuan, ubuntu, centos, fedora, opensuse, archlinux, alpine, gentoo, nixos, unmanaged'"},
		},
		{
			name:   "minimum",
			method: putConfig,
			params: with(ct, "memory", "8"),
			want:   map[string]string{"memory": "value must have a minimum value of 16"},
		},
		{
			name:   "maximum, number in exponent notation",
			method: putConfig,
			params: with(ct, "cpulimit", "1e4", "cores", "8193"),
			want: map[string]string{
				"cpulimit": "value must have a maximum value of 8192",
				"cores":    "value must have a maximum value of 8192",
			},
		},
		{
			name:   "maximum length",
			method: putConfig,
			params: with(ct, "digest", strings.Repeat("a", 41)),
			want:   map[string]string{"digest": "value may only be 40 characters long"},
		},
		{
			name:   "minimum length",
			method: create,
			params: with(newCT, "password", "abcd"),
			want:   map[string]string{"password": "value must be at least 5 characters long"},
		},
		{
			name:   "integer type check",
			method: putConfig,
			params: with(ct, "cores", "two"),
			want:   map[string]string{"cores": "type check ('integer') failed - got 'two'"},
		},
		{
			name:   "number type check",
			method: putConfig,
			params: with(ct, "cpulimit", "1,5"),
			want:   map[string]string{"cpulimit": "type check ('number') failed - got '1,5'"},
		},
		{
			name:   "top-level booleans are 1 or 0 only",
			method: putConfig,
			params: with(ct, "onboot", "true", "protection", "yes"),
			want: map[string]string{
				"onboot":     "type check ('boolean') failed - got 'true'",
				"protection": "type check ('boolean') failed - got 'yes'",
			},
		},
		{
			name:   "booleans in property strings take PVE's words",
			method: putConfig,
			params: with(ct, "mp0", "local:8,mp=/a,backup=on,ro=False,quota=maybe"),
			want:   map[string]string{"mp0": "invalid format - format error\nmp0.quota: type check ('boolean') failed - got 'maybe'\n"},
		},
		{
			name:   "unknown parameter",
			method: putConfig,
			params: with(ct, "color", "red"),
			want:   map[string]string{"color": "property is not defined in schema and the schema does not allow additional properties"},
		},
		{
			name:   "index beyond the range PVE defines",
			method: putConfig,
			params: with(ct, "mp256", "local:8,mp=/x", "net32", "name=eth9", "mp[n]", "local:8,mp=/x"),
			want: map[string]string{
				"mp256": "property is not defined in schema and the schema does not allow additional properties",
				"mp[n]": "property is not defined in schema and the schema does not allow additional properties",
				"net32": "property is not defined in schema and the schema does not allow additional properties",
			},
		},
		{
			name:   "invalid key in a property string",
			method: putConfig,
			params: with(ct, "mp0", "local:8,mp=/x,bogus=1"),
			want:   map[string]string{"mp0": "invalid format - invalid key in comma-separated list property: bogus\n"},
		},
		{
			name:   "duplicate key in a property string",
			method: putConfig,
			params: with(ct, "mp0", "local:8,mp=/x,mp=/y"),
			want:   map[string]string{"mp0": "invalid format - duplicate key in comma-separated list property: mp\n"},
		},
		{
			name:   "second bare value repeats the default key",
			method: putConfig,
			params: with(ct, "rootfs", "local:8,local:9"),
			want:   map[string]string{"rootfs": "invalid format - duplicate key in comma-separated list property: volume\n"},
		},
		{
			name:   "mount point path with illegal sequences",
			method: putConfig,
			params: with(ct, "mp1", "local:1,mp=/srv/../etc"),
			want: map[string]string{"mp1": "invalid format - format error\n" +
				"mp1.mp: invalid format - /srv/../etc contains illegal character sequences\n\n"},
		},
		{
			name:   "two bad keys, listed sorted",
			method: putConfig,
			params: with(ct, "mp1", "local:1,mp=/a/.,size=8X"),
			want: map[string]string{"mp1": "invalid format - format error\n" +
				"mp1.mp: invalid format - /a/. contains illegal character sequences\n\n" +
				"mp1.size: invalid format - value does not look like a valid disk size: 8X\n\n"},
		},
		{
			name:   "configid list",
			method: putConfig,
			params: with(ct, "delete", "mp0,9lives"),
			want:   map[string]string{"delete": "invalid format - invalid configuration ID '9lives'\n"},
		},
		{
			name:   "tag list",
			method: putConfig,
			params: with(ct, "tags", "web;fr!ont"),
			want:   map[string]string{"tags": "invalid format - invalid characters in tag\n"},
		},
		{
			name:   "nameserver list",
			method: putConfig,
			params: with(ct, "nameserver", "192.0.2.1,192.0.2.300"),
			want:   map[string]string{"nameserver": "invalid format - value does not look like a valid IP address\n"},
		},
		{
			name:   "network property string",
			method: putConfig,
			params: with(ct,
				"net0", "bridge=vmbr0",
				"net1", "name=eth1,hwaddr=01:00:5E:00:00:01,ip=192.0.2.1/33,gw=192.0.2.256,tag=4095"),
			want: map[string]string{
				"net0": "invalid format - format error\nnet0.name: property is missing and it is not optional\n",
				"net1": "invalid format - format error\n" +
					"net1.gw: invalid format - value does not look like a valid IPv4 address\n\n" +
					"net1.hwaddr: invalid format - value does not look like a valid unicast MAC address\n\n" +
					"net1.ip: invalid format - value does not look like a valid ipv4 network configuration\n\n" +
					"net1.tag: value must have a maximum value of 4094\n",
			},
		},
		{
			name:   "device path",
			method: putConfig,
			params: with(ct, "dev0", "/dev/../etc/shadow", "dev1", "path=/tmp/x,mode=0999"),
			want: map[string]string{
				"dev0": "invalid format - format error\ndev0.path: invalid format - /dev/../etc/shadow is not a valid device path\n\n",
				"dev1": "invalid format - format error\n" +
					"dev1.mode: value does not match the regex pattern\n" +
					"dev1.path: invalid format - /tmp/x is not a valid device path\n\n",
			},
		},
		{
			name:   "unused volume",
			method: putConfig,
			params: with(ct, "unused0", "no-storage-here"),
			want: map[string]string{"unused0": "invalid format - format error\n" +
				"unused0.volume: invalid format - unable to parse volume ID 'no-storage-here'\n\n"},
		},
		{
			name:   "path parameters are validated too",
			method: putConfig,
			params: map[string]string{"node": "pve_1", "vmid": "99"},
			want: map[string]string{
				"node": "invalid format - value does not look like a valid node name\n",
				"vmid": "invalid format - value does not look like a valid VM ID\n",
			},
		},
		{
			name:   "requires",
			method: create,
			params: with(newCT, "unique", "1"),
			want:   map[string]string{"restore": "missing property required by 'unique'"},
		},
		{
			name:   "storage content type and storage id",
			method: content,
			params: map[string]string{"node": "pve", "storage": "9local", "content": "disk"},
			want: map[string]string{
				"content": "invalid format - invalid content type 'disk'\n",
				"storage": "invalid format - storage ID '9local' contains illegal characters\n",
			},
		},
		{
			name:   "privilege list",
			method: roles,
			params: map[string]string{"roleid": "Ops", "privs": "VM.Audit,VM.Monitor"},
			want:   map[string]string{"privs": "invalid format - invalid privilege 'VM.Monitor'\n"},
		},
		{
			name:   "user id and token id",
			method: token,
			params: map[string]string{"userid": "ab", "tokenid": "1x"},
			want: map[string]string{
				"userid":  "invalid format - user name 'ab' is too short\n",
				"tokenid": "value does not match the regex pattern",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := validationErrors(t, tt.method, tt.params)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Validate errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMethod_Validate_versions(t *testing.T) {
	tests := []struct {
		name   string
		verb   string
		path   string
		params map[string]string
		want91 map[string]string
		want84 map[string]string
	}{
		{
			name:   "entrypoint, env and ha-managed are new in 9",
			verb:   "POST",
			path:   "/nodes/pve/lxc",
			params: map[string]string{"node": "pve", "vmid": "200", "ostemplate": "local:vztmpl/x.tar.zst", "entrypoint": "/bin/sh", "env": "A=1", "ha-managed": "1"},
			want84: map[string]string{
				"entrypoint": "property is not defined in schema and the schema does not allow additional properties",
				"env":        "property is not defined in schema and the schema does not allow additional properties",
				"ha-managed": "property is not defined in schema and the schema does not allow additional properties",
			},
		},
		{
			name:   "PVE 9 reworded the requires error",
			verb:   "POST",
			path:   "/nodes/pve/lxc",
			params: map[string]string{"node": "pve", "vmid": "200", "ostemplate": "local:vztmpl/x.tar.zst", "unique": "1"},
			want91: map[string]string{"restore": "missing property required by 'unique'"},
			want84: map[string]string{"restore": "missing property - 'unique' requires this property"},
		},
		{
			name:   "time zones come from zone.tab",
			verb:   "PUT",
			path:   "/nodes/pve/lxc/101/config",
			params: map[string]string{"node": "pve", "vmid": "101", "timezone": "Mars/Base"},
			want91: map[string]string{"timezone": "invalid format - invalid time zone 'Mars/Base'\n"},
			want84: map[string]string{"timezone": "invalid format - invalid time zone 'Mars/Base'\n"},
		},
		{
			name:   "host, UTC and zone.tab zones are time zones",
			verb:   "PUT",
			path:   "/nodes/pve/lxc/101/config",
			params: map[string]string{"node": "pve", "vmid": "101", "timezone": "Europe/Vienna"},
		},
		{
			name:   "keepattrs mount point option is new in 9",
			verb:   "PUT",
			path:   "/nodes/pve/lxc/101/config",
			params: map[string]string{"node": "pve", "vmid": "101", "mp0": "local-lvm:8,mp=/data,keepattrs=1"},
			want84: map[string]string{"mp0": "invalid format - invalid key in comma-separated list property: keepattrs\n"},
		},
		{
			name:   "VM.Monitor was dropped in 9, VM.Replicate added",
			verb:   "PUT",
			path:   "/access/roles/Ops",
			params: map[string]string{"roleid": "Ops", "privs": "VM.Monitor VM.Replicate"},
			want91: map[string]string{"privs": "invalid format - invalid privilege 'VM.Monitor'\n"},
			want84: map[string]string{"privs": "invalid format - invalid privilege 'VM.Replicate'\n"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for version, want := range map[string]map[string]string{"9.1": tt.want91, "8.4": tt.want84} {
				m := mustMethod(t, mustLoad(t, version), tt.verb, tt.path)
				if diff := cmp.Diff(want, validationErrors(t, m, tt.params)); diff != "" {
					t.Errorf("PVE %s: Validate errors (-want +got):\n%s", version, diff)
				}
			}
		})
	}
}

func TestParamError_Error(t *testing.T) {
	err := &schema.ParamError{Errors: map[string]string{
		"mp0": "invalid format - format error\nmp0.mp: property is missing and it is not optional\n",
		"foo": "property is not defined in schema and the schema does not allow additional properties",
	}}
	want := "parameter verification failed: foo: property is not defined in schema and the schema does not allow additional properties;" +
		" mp0: invalid format - format error mp0.mp: property is missing and it is not optional"
	if got := err.Error(); got != want {
		t.Errorf("Error()=%q, want %q", got, want)
	}
}
