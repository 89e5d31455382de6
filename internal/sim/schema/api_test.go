package schema_test

import (
	"encoding/json"
	"sort"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/sim/schema"
)

func TestLoad(t *testing.T) {
	for _, version := range schema.Versions {
		a := mustLoad(t, version)
		if got, want := a.Version, version; got != want {
			t.Errorf("Load(%q).Version=%q", version, got)
		}
		if again := mustLoad(t, version); again != a {
			t.Errorf("Load(%q) twice returned different *API", version)
		}
	}
	if _, err := schema.Load("7.4"); err == nil {
		t.Error("Load(\"7.4\") succeeded, want an error")
	}
}

func TestAPI_Routes(t *testing.T) {
	// Method counts as stated in shared/pve-api/README.md.
	for version, want := range map[string]int{"9.1": 649, "8.4": 605} {
		routes := mustLoad(t, version).Routes()
		if got := len(routes); got != want {
			t.Errorf("PVE %s: %d routes, want %d", version, got, want)
		}
		sorted := sort.SliceIsSorted(routes, func(i, j int) bool {
			if routes[i].Path != routes[j].Path {
				return routes[i].Path < routes[j].Path
			}
			return routes[i].HTTPMethod < routes[j].HTTPMethod
		})
		if !sorted {
			t.Errorf("PVE %s: Routes() not sorted by path and method", version)
		}
	}
}

func TestAPI_Lookup(t *testing.T) {
	a := mustLoad(t, "9.1")
	tests := []struct {
		verb, path string
		wantPath   string
		wantParams map[string]string
	}{
		{"GET", "/nodes/pve/lxc/101/config", "/nodes/{node}/lxc/{vmid}/config", map[string]string{"node": "pve", "vmid": "101"}},
		{"put", "/api2/json/nodes/pve/lxc/101/config", "/nodes/{node}/lxc/{vmid}/config", map[string]string{"node": "pve", "vmid": "101"}},
		{"POST", "/nodes/pve/lxc", "/nodes/{node}/lxc", map[string]string{"node": "pve"}},
		{"POST", "//nodes//pve/lxc/", "/nodes/{node}/lxc", map[string]string{"node": "pve"}},
		{"GET", "/nodes/pve/lxc/101/status/current", "/nodes/{node}/lxc/{vmid}/status/current", map[string]string{"node": "pve", "vmid": "101"}},
		{"GET", "/nodes/pve/tasks/UPID:pve:0000A1B2:00C3D4E5:665F1A2B:vzcreate:101:ctl@pve!ctl:/status",
			"/nodes/{node}/tasks/{upid}/status",
			map[string]string{"node": "pve", "upid": "UPID:pve:0000A1B2:00C3D4E5:665F1A2B:vzcreate:101:ctl@pve!ctl:"}},
		{"DELETE", "/nodes/pve/storage/local/content/local:backup/vzdump-lxc-101-2026_01_01-00_00_00.tar.zst",
			"/nodes/{node}/storage/{storage}/content/{volume}",
			map[string]string{"node": "pve", "storage": "local", "volume": "local:backup/vzdump-lxc-101-2026_01_01-00_00_00.tar.zst"}},
		{"GET", "/nodes/pve/storage/local-lvm/content", "/nodes/{node}/storage/{storage}/content", map[string]string{"node": "pve", "storage": "local-lvm"}},
		{"GET", "/access/permissions", "/access/permissions", map[string]string{}},
		{"GET", "/version", "/version", map[string]string{}},
		// Literal segments win over parameters.
		{"GET", "/access/users/u@pve/token", "/access/users/{userid}/token", map[string]string{"userid": "u@pve"}},
		{"GET", "/cluster/nextid", "/cluster/nextid", map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.verb+" "+tt.path, func(t *testing.T) {
			m, params, ok := a.Lookup(tt.verb, tt.path)
			if !ok {
				t.Fatal("Lookup found nothing")
			}
			if m.Path != tt.wantPath {
				t.Errorf("Path=%q, want %q", m.Path, tt.wantPath)
			}
			if diff := cmp.Diff(tt.wantParams, params); diff != "" {
				t.Errorf("path params (-want +got):\n%s", diff)
			}
		})
	}
	for _, miss := range []struct{ verb, path string }{
		{"GET", "/nodes/pve/lxc/101/nonsense"},
		{"PATCH", "/nodes/pve/lxc/101/config"},
		{"POST", "/version"},
		{"GET", "/"},
	} {
		if m, _, ok := a.Lookup(miss.verb, miss.path); ok {
			t.Errorf("Lookup(%s %s) found %s %s, want nothing", miss.verb, miss.path, m.HTTPMethod, m.Path)
		}
	}
}

func TestMethod_Param(t *testing.T) {
	lxc := mustMethod(t, mustLoad(t, "9.1"), "PUT", "/nodes/pve/lxc/101/config")
	qemu := mustMethod(t, mustLoad(t, "9.1"), "POST", "/nodes/pve/qemu/100/config")
	tests := []struct {
		method  *schema.Method
		name    string
		wantKey string // "" when the parameter must not exist
	}{
		{lxc, "mp0", "mp[n]"},
		{lxc, "mp3", "mp[n]"},
		{lxc, "mp255", "mp[n]"},
		{lxc, "mp256", ""},
		{lxc, "mp01", ""},
		{lxc, "unused12", "unused[n]"},
		{lxc, "unused255", "unused[n]"},
		{lxc, "net0", "net[n]"},
		{lxc, "net31", "net[n]"},
		{lxc, "net32", ""},
		{lxc, "dev255", "dev[n]"},
		{lxc, "rootfs", "rootfs"},
		{lxc, "hostname", "hostname"},
		{lxc, "mp", ""},
		{lxc, "scsi0", ""},
		{qemu, "scsi30", "scsi[n]"},
		{qemu, "scsi31", ""},
		{qemu, "ide3", "ide[n]"},
		{qemu, "ide4", ""},
		{qemu, "efidisk0", "efidisk0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.method.Param(tt.name)
			if tt.wantKey == "" {
				if p != nil {
					t.Fatalf("Param(%q) = %s, want nil", tt.name, p.Key)
				}
				return
			}
			if p == nil {
				t.Fatalf("Param(%q) = nil, want %s", tt.name, tt.wantKey)
			}
			if p.Key != tt.wantKey || p.Name != tt.name {
				t.Errorf("Param(%q) = {Name %q Key %q}, want {%q %q}", tt.name, p.Name, p.Key, tt.name, tt.wantKey)
			}
		})
	}
}

func TestMethod_facts(t *testing.T) {
	a := mustLoad(t, "9.1")
	put := mustMethod(t, a, "PUT", "/nodes/pve/lxc/101/config")
	if !put.AllowToken || !put.Protected || put.Name != "update_vm" {
		t.Errorf("PUT config: AllowToken=%v Protected=%v Name=%q", put.AllowToken, put.Protected, put.Name)
	}
	wantCheck := &schema.Check{Op: schema.OpPerm, Path: "/vms/{vmid}", Any: true,
		Privs: []string{"VM.Config.Disk", "VM.Config.CPU", "VM.Config.Memory", "VM.Config.Network", "VM.Config.Options"}}
	if diff := cmp.Diff(&schema.Permission{Check: wantCheck}, put.Perm); diff != "" {
		t.Errorf("PUT config permissions (-want +got):\n%s", diff)
	}
	if got := put.Returns.Type; got != "null" {
		t.Errorf("PUT config returns %q, want null (synchronous, behaviour.md §0)", got)
	}
	if got := mustMethod(t, a, "POST", "/nodes/pve/lxc/101/status/start").Returns.Type; got != "string" {
		t.Errorf("POST start returns %q, want string (a UPID)", got)
	}
	if ticket := mustMethod(t, a, "POST", "/access/ticket"); ticket.AllowToken || ticket.Perm.User != "world" {
		t.Errorf("POST /access/ticket: AllowToken=%v User=%q, want false, world", ticket.AllowToken, ticket.Perm.User)
	}

	// Return fields carry the JSON types the emulator renders with.
	get := mustMethod(t, a, "GET", "/nodes/pve/lxc/101/config")
	types := map[string]string{}
	for _, name := range []string{"cores", "memory", "onboot", "hostname", "cpulimit", "mp7", "unused3", "digest"} {
		if _, p := get.Returns.Property(name); p != nil {
			types[name] = p.Type
		}
	}
	wantTypes := map[string]string{"cores": "integer", "memory": "integer", "onboot": "boolean", "hostname": "string",
		"cpulimit": "number", "mp7": "string", "unused3": "string", "digest": "string"}
	if diff := cmp.Diff(wantTypes, types); diff != "" {
		t.Errorf("GET config return types (-want +got):\n%s", diff)
	}
	list := mustMethod(t, a, "GET", "/nodes/pve/lxc")
	if list.Returns.Type != "array" || list.Returns.Items.Properties["vmid"].Type != "integer" {
		t.Errorf("GET lxc list: want array of objects with integer vmid")
	}
}

func TestPermission_checkTree(t *testing.T) {
	a := mustLoad(t, "9.1")
	tests := []struct {
		verb, path string
		want       string // the check re-encoded in PVE's array notation
	}{
		{"POST", "/nodes/pve/qemu/100/clone",
			`["and",["perm","/vms/{vmid}",["VM.Clone"]],["or",["perm","/vms/{newid}",["VM.Allocate"]],["perm","/pool/{pool}",["VM.Allocate"],"require_param","pool"]]]`},
		{"POST", "/access/users",
			`["and",["userid-param","Realm.AllocateUser"],["userid-group",["User.Modify"],"groups_param","create"]]`},
		{"PUT", "/access/acl", `["perm-modify","{path}"]`},
		{"GET", "/nodes/pve/storage/local/content",
			`["perm","/storage/{storage}",["Datastore.Audit","Datastore.AllocateSpace"],"any",1]`},
	}
	for _, tt := range tests {
		t.Run(tt.verb+" "+tt.path, func(t *testing.T) {
			m := mustMethod(t, a, tt.verb, tt.path)
			if m.Perm == nil || m.Perm.Check == nil {
				t.Fatal("no permission check")
			}
			got, err := json.Marshal(m.Perm.Check)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("check=%s, want %s", got, tt.want)
			}
		})
	}
	var c schema.Check
	if err := json.Unmarshal([]byte(`["perm","/",["Sys.Audit"],"frobnicate",1]`), &c); err == nil {
		t.Error("unknown perm option parsed without error")
	}
	if err := json.Unmarshal([]byte(`["admin"]`), &c); err == nil {
		t.Error("unknown op parsed without error")
	}
}

func TestAPI_UnverifiedFormats(t *testing.T) {
	got := map[string]bool{}
	for _, f := range mustLoad(t, "9.1").UnverifiedFormats() {
		got[f] = true
	}
	// Formats the emulator's endpoints rely on must be verified.
	for _, f := range []string{"pve-node", "pve-vmid", "pve-storage-id", "pve-volume-id", "pve-lxc-mp-string",
		"disk-size", "pve-configid", "pve-tag", "pve-userid", "pve-tokenid", "pve-roleid", "pve-priv",
		"pve-poolid", "ipv4", "ipv6", "pve-ipv4-config", "pve-ipv6-config", "mac-addr", "dns-name",
		"lxc-ip-with-ll-iface", "pve-lxc-dev-string", "pve-storage-content", "email", "pve-volume-id-or-qm-path",
		"pve-sdn-zone-id", "pve-sdn-vnet-id", "pve-sdn-subnet-id", "pve-ct-timezone",
		"pve-fw-addr-spec", "pve-fw-sport-spec", "pve-fw-dport-spec", "pve-fw-protocol-spec", "pve-fw-icmp-type-spec"} {
		if got[f] {
			t.Errorf("format %s is unverified", f)
		}
	}
	for _, f := range []string{"prune-backups", "pve-calendar-event"} {
		if !got[f] {
			t.Errorf("format %s missing from UnverifiedFormats", f)
		}
	}
}
