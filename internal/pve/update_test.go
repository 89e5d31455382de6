package pve_test

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/testutil/refdata"
)

// configUpdateCases are the bodies corral writes, each with the form
// apply built by hand before ConfigUpdate (the strings PVE expects).
var configUpdateCases = []struct {
	name string
	in   pve.ConfigUpdate
	want map[string]string
}{
	{"empty", pve.ConfigUpdate{}, map[string]string{}},
	{
		"keeper allocates a volume",
		pve.ConfigUpdate{MountPoints: map[int]pve.MountPoint{2: {Volume: "local-lvm:8", Path: "/corral/web/data"}},
			Description: pve.Ptr("corral keeper\n"), Digest: "0123abcd"},
		map[string]string{"mp2": "local-lvm:8,mp=/corral/web/data", "description": "corral keeper\n", "digest": "0123abcd"},
	},
	{
		"keeper records a volume",
		pve.ConfigUpdate{MountPoints: map[int]pve.MountPoint{0: {Volume: "local-lvm:vm-900-disk-3", Path: "/corral/web/data"}}},
		map[string]string{"mp0": "local-lvm:vm-900-disk-3,mp=/corral/web/data"},
	},
	{
		"fractional GiB",
		pve.ConfigUpdate{MountPoints: map[int]pve.MountPoint{0: {Volume: "local-lvm:0.5", Path: "/data"}}},
		map[string]string{"mp0": "local-lvm:0.5,mp=/data"},
	},
	{
		"attach with backup off",
		pve.ConfigUpdate{MountPoints: map[int]pve.MountPoint{1: {Volume: "local-lvm:vm-900-disk-3", Path: "/srv/data", Backup: pve.Ptr(false)}}},
		map[string]string{"mp1": "local-lvm:vm-900-disk-3,mp=/srv/data,backup=0"},
	},
	{
		"attach with backup on",
		pve.ConfigUpdate{MountPoints: map[int]pve.MountPoint{11: {Volume: "nfs:900/vm-900-disk-0.raw", Path: "/a", Backup: pve.Ptr(true)}}},
		map[string]string{"mp11": "nfs:900/vm-900-disk-0.raw,mp=/a,backup=1"},
	},
	{
		"network device",
		pve.ConfigUpdate{Net: map[int]pve.NetDevice{1: {Name: "eth1", Bridge: "vmbr0", IP: "10.0.200.20/16"}}},
		map[string]string{"net1": "name=eth1,bridge=vmbr0,ip=10.0.200.20/16"},
	},
	{
		"scalars",
		pve.ConfigUpdate{Hostname: pve.Ptr("web"), Memory: pve.Ptr[int64](1024), Swap: pve.Ptr[int64](0), Cores: pve.Ptr[int64](2),
			OnBoot: pve.Ptr(true), Protection: pve.Ptr(false), Features: pve.Ptr("nesting=1"), Nameserver: pve.Ptr("1.1.1.1")},
		map[string]string{"hostname": "web", "memory": "1024", "swap": "0", "cores": "2", "onboot": "1", "protection": "0",
			"features": "nesting=1", "nameserver": "1.1.1.1"},
	},
	{"tags", pve.ConfigUpdate{Tags: []string{"corral", "corral-app-web"}}, map[string]string{"tags": "corral;corral-app-web"}},
	{"one tag", pve.ConfigUpdate{Tags: []string{"corral"}}, map[string]string{"tags": "corral"}},
	{"empty notes", pve.ConfigUpdate{Description: pve.Ptr("")}, map[string]string{"description": ""}},
	{"protection on", pve.ConfigUpdate{Protection: pve.Ptr(true)}, map[string]string{"protection": "1"}},
	{"delete", pve.ConfigUpdate{Delete: []string{"mp0", "mp3"}}, map[string]string{"delete": "mp0,mp3"}},
	{"revert", pve.ConfigUpdate{Revert: []string{"memory", "cores"}}, map[string]string{"revert": "memory,cores"}},
	{
		"raw edits and a delete",
		pve.ConfigUpdate{Raw: map[string]string{"memory": "2048", "net0": "name=eth0,bridge=vmbr0,ip=dhcp"}, Delete: []string{"nameserver", "unused0"}},
		map[string]string{"memory": "2048", "net0": "name=eth0,bridge=vmbr0,ip=dhcp", "delete": "nameserver,unused0"},
	},
	{"typed wins over raw", pve.ConfigUpdate{Raw: map[string]string{"memory": "1"}, Memory: pve.Ptr[int64](2)}, map[string]string{"memory": "2"}},
}

func TestConfigUpdate_Encode(t *testing.T) {
	for _, tt := range configUpdateCases {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]string{}
			for k, v := range tt.in.Encode() {
				if len(v) != 1 {
					t.Fatalf("Encode()[%q]=%q, want one value", k, v)
				}
				got[k] = v[0]
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Encode() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConfigUpdate_IsZero(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   *pve.ConfigUpdate
		want bool
	}{
		{"nil", nil, true},
		{"empty", &pve.ConfigUpdate{}, true},
		{"digest alone", &pve.ConfigUpdate{Digest: "ab"}, true},
		{"empty maps", &pve.ConfigUpdate{MountPoints: map[int]pve.MountPoint{}, Raw: map[string]string{}}, true},
		{"delete", &pve.ConfigUpdate{Delete: []string{"mp0"}}, false},
		{"notes", &pve.ConfigUpdate{Description: pve.Ptr("")}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.in.IsZero(); got != tt.want {
				t.Fatalf("IsZero()=%v, want %v", got, tt.want)
			}
		})
	}
}

func TestMountIndex(t *testing.T) {
	for key, want := range map[string]int{"mp0": 0, "mp17": 17, "mp255": 255, "mp": -1, "mpx": -1, "unused0": -1, "rootfs": -1, "mp-1": -1} {
		n, ok := pve.MountIndex(key)
		if !ok {
			n = -1
		}
		if n != want {
			t.Errorf("MountIndex(%q)=%d, want %d", key, n, want)
		}
		if ok && pve.MountKey(n) != key {
			t.Errorf("MountKey(%d)=%q, want %q", n, pve.MountKey(n), key)
		}
	}
}

// TestConfigUpdate_Schema checks every key the cases write against the
// PUT …/lxc/{vmid}/config parameters of apidoc.json, and every mount
// point and network device option against their formats.
func TestConfigUpdate_Schema(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(refdata.Dir(t), "pve-api", "apidoc.json"))
	if err != nil {
		t.Fatal(err)
	}
	type node struct {
		Path     string `json:"path"`
		Children []node `json:"children"`
		Info     map[string]struct {
			Parameters struct {
				Properties map[string]struct {
					Format json.RawMessage `json:"format"`
				} `json:"properties"`
			} `json:"parameters"`
		} `json:"info"`
	}
	var tree []node
	if err := json.Unmarshal(raw, &tree); err != nil {
		t.Fatal(err)
	}
	var find func([]node) *node
	find = func(ns []node) *node {
		for i := range ns {
			if ns[i].Path == "/nodes/{node}/lxc/{vmid}/config" {
				return &ns[i]
			}
			if n := find(ns[i].Children); n != nil {
				return n
			}
		}
		return nil
	}
	n := find(tree)
	if n == nil {
		t.Fatal("apidoc.json has no /nodes/{node}/lxc/{vmid}/config")
	}
	props := n.Info["PUT"].Parameters.Properties
	subKeys := func(param string) map[string]bool {
		var f map[string]json.RawMessage
		if err := json.Unmarshal(props[param].Format, &f); err != nil {
			t.Fatalf("%s: format: %v", param, err)
		}
		keys := map[string]bool{}
		for k := range f {
			keys[k] = true
		}
		return keys
	}
	mpKeys, netKeys := subKeys("mp[n]"), subKeys("net[n]")
	indexed := regexp.MustCompile(`^(mp|net|unused)\d+$`)
	optKey := regexp.MustCompile(`(?:^|,)([a-z_-]+)=`)
	for _, tt := range configUpdateCases {
		for k, v := range tt.in.Encode() {
			param := k
			if m := indexed.FindStringSubmatch(k); m != nil {
				param = m[1] + "[n]"
			}
			if _, ok := props[param]; !ok {
				t.Errorf("%s: key %q is not a parameter of PUT config", tt.name, k)
			}
			known := map[string]map[string]bool{"mp[n]": mpKeys, "net[n]": netKeys}[param]
			for _, m := range optKey.FindAllStringSubmatch(v[0], -1) {
				if known != nil && !known[m[1]] {
					t.Errorf("%s: %s=%q: option %q is not in the format", tt.name, k, v[0], m[1])
				}
			}
		}
	}
}

func TestContainerCreate_Encode(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   pve.ContainerCreate
		want url.Values
	}{
		{
			"keeper (holderParams)",
			pve.ContainerCreate{VMID: 900, OSTemplate: "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst",
				RootFS: pve.MountPoint{Volume: "local-lvm:1"}, Unprivileged: pve.Ptr(true),
				Config: pve.ConfigUpdate{Hostname: pve.Ptr("corral-keeper"), Cores: pve.Ptr[int64](1), Memory: pve.Ptr[int64](64),
					Swap: pve.Ptr[int64](0), Features: pve.Ptr("nesting=1"), Tags: []string{"corral", "corral-keeper"},
					Description: pve.Ptr("notes\n"), Protection: pve.Ptr(true)}},
			url.Values{"vmid": {"900"}, "ostemplate": {"local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst"}, "rootfs": {"local-lvm:1"},
				"unprivileged": {"1"}, "hostname": {"corral-keeper"}, "cores": {"1"}, "memory": {"64"}, "swap": {"0"},
				"features": {"nesting=1"}, "tags": {"corral;corral-keeper"}, "description": {"notes\n"}, "protection": {"1"}},
		},
		{
			"app (createParams)",
			pve.ContainerCreate{VMID: 101, OSTemplate: "local:vztmpl/alpine.tar.xz", RootFS: pve.MountPoint{Volume: "local-lvm:2.5"},
				Unprivileged: pve.Ptr(false), SSHPublicKeys: "ssh-ed25519 AAA a\nssh-ed25519 BBB corral\n", Password: "pw",
				Config: pve.ConfigUpdate{Raw: map[string]string{"hostname": "web", "net0": "name=eth0,bridge=vmbr0,ip=dhcp"},
					Delete: []string{"not-sent"}, Digest: "not-sent"}},
			url.Values{"vmid": {"101"}, "ostemplate": {"local:vztmpl/alpine.tar.xz"}, "rootfs": {"local-lvm:2.5"}, "unprivileged": {"0"},
				"ssh-public-keys": {"ssh-ed25519 AAA a\nssh-ed25519 BBB corral\n"}, "password": {"pw"},
				"hostname": {"web"}, "net0": {"name=eth0,bridge=vmbr0,ip=dhcp"}},
		},
		{"bare", pve.ContainerCreate{VMID: 102}, url.Values{"vmid": {"102"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.in.Encode()); diff != "" {
				t.Errorf("Encode() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestVolumeMove_Encode(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   pve.VolumeMove
		want url.Values
	}{
		{"to another ct", pve.VolumeMove{Volume: "mp1", TargetVMID: 900, TargetVolume: "unused3"},
			url.Values{"volume": {"mp1"}, "target-vmid": {"900"}, "target-volume": {"unused3"}}},
		{"to another storage", pve.VolumeMove{Volume: "rootfs", Storage: "nfs", Delete: pve.Ptr(true)},
			url.Values{"volume": {"rootfs"}, "storage": {"nfs"}, "delete": {"1"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.in.Encode()); diff != "" {
				t.Errorf("Encode() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDownload_Encode(t *testing.T) {
	d := pve.Download{URL: "https://example.org/a.tar.zst", Content: "vztmpl", Filename: "a.tar.zst", Checksum: "ab12", ChecksumAlgorithm: "sha256"}
	want := url.Values{"url": {"https://example.org/a.tar.zst"}, "content": {"vztmpl"}, "filename": {"a.tar.zst"},
		"checksum": {"ab12"}, "checksum-algorithm": {"sha256"}}
	if diff := cmp.Diff(want, d.Encode()); diff != "" {
		t.Errorf("Encode() mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(url.Values{"filename": {"x"}}, (&pve.Download{Filename: "x"}).Encode()); diff != "" {
		t.Errorf("Encode() of a bare download (-want +got):\n%s", diff)
	}
}
