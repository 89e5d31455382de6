package manifest_test

import (
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/corralhq/corral/internal/manifest"
)

const debian12 = "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst"

// ignorePos leaves positions out of comparisons of Apps.
var ignorePos = cmpopts.IgnoreTypes(manifest.Pos{})

// TestLoad_examples checks that the shipped examples load and say what
// their comments promise.
func TestLoad_examples(t *testing.T) {
	tests := []struct {
		name string
		want []manifest.App
	}{
		{"quickstart", []manifest.App{{
			Name: "hello", Template: debian12, Unprivileged: true,
			Cores: 1, MemoryMiB: 512, SwapMiB: 512,
			RootFS:   manifest.RootFS{Storage: "local-lvm", Size: 4 * manifest.GiB},
			Features: manifest.Features{Nesting: true},
			Network:  manifest.Network{Bridge: "vmbr0", IP: "dhcp"},
			Volumes: []manifest.Volume{{
				Name: "data", Storage: "local-lvm", Size: 1 * manifest.GiB, Mount: "/srv/data",
				Backup: true, Reclaim: manifest.ReclaimRetain,
			}},
		}}},
		// Seeds 000/001: CT 105, unprivileged Debian 12, nesting, 2 cores,
		// 4096 MB, 20G rootfs on local-lvm, DHCP on vmbr0, onboot, and a
		// retained 10G volume at /home/hermes with backup=1.
		{"hermes", []manifest.App{{
			Name: "hermes", VMID: 105, Template: debian12, Unprivileged: true,
			Cores: 2, MemoryMiB: 4096, SwapMiB: 512,
			RootFS:      manifest.RootFS{Storage: "local-lvm", Size: 20 * manifest.GiB},
			Features:    manifest.Features{Nesting: true},
			Network:     manifest.Network{Bridge: "vmbr0", IP: "dhcp"},
			Tags:        []string{"ai", "agent"},
			OnBoot:      true,
			Description: "Hermes Agent (bare-metal install, dashboard on :9119)",
			Volumes: []manifest.Volume{{
				Name: "home", Storage: "local-lvm", Size: 10 * manifest.GiB, Mount: "/home/hermes",
				Backup: true, Reclaim: manifest.ReclaimRetain,
			}},
		}}},
	}
	root := repoRoot(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(root, "examples", tt.name, "corral.yaml")
			f, err := manifest.Load(path, manifest.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := f.Path, path; got != want {
				t.Errorf("Path=%q, want %q", got, want)
			}
			if diff := cmp.Diff(tt.want, f.Apps, ignorePos); diff != "" {
				t.Errorf("apps (-want +got):\n%s", diff)
			}
			if got := f.Secrets(); len(got) != 0 {
				t.Errorf("Secrets()=%d values, want none", len(got))
			}
		})
	}
}

// validCases are valid manifests and the first app each must give. The
// schema test checks that the JSON Schema accepts them too.
var validCases = func() []validCase {
	base := manifest.App{
		Name: "web", Template: debian12, Unprivileged: true,
		Cores: 1, MemoryMiB: 512, SwapMiB: 512,
		RootFS:  manifest.RootFS{Storage: "local-lvm", Size: 8 * manifest.GiB},
		Network: manifest.Network{Bridge: "vmbr0", IP: "dhcp"},
	}
	with := func(change func(a *manifest.App)) manifest.App {
		a := base
		change(&a)
		return a
	}
	return []validCase{
		{"defaults", `
apps:
  - name: web
    template: debian-12-standard_12.12-1_amd64.tar.zst`, base},
		{"template volid kept", `
apps:
  - name: web
    template: nfs:vztmpl/alpine-3.20-default_20240908_amd64.tar.xz`,
			with(func(a *manifest.App) { a.Template = "nfs:vztmpl/alpine-3.20-default_20240908_amd64.tar.xz" })},
		{"everything", `
apps:
  - name: web
    node: pve
    vmid: 0x69
    template: debian-12-standard_12.12-1_amd64.tar.zst
    unprivileged: true
    cores: 4
    memory: 2048.0
    swap: 0
    rootfs: { storage: fast, size: 1.5T }
    features: { nesting: false }
    network: { bridge: vmbr1, ip: 192.168.1.50/24, gateway: 192.168.1.1, dns: [1.1.1.1, "2606:4700::1111"] }
    tags: [web, prod+eu]
    onboot: true
    description: "costs $${HOME} a month"
    volumes:
      - { name: data, size: 512M, mount: /srv/data, backup: false, reclaim: delete }
      - { name: home, adopt: "local-zfs:subvol-999-disk-0", mount: /home }
      - { name: logs, storage: local-zfs, adopt: "local-zfs:vm-999-disk-3", size: 2G, mount: /var/log/app }`,
			with(func(a *manifest.App) {
				a.Node, a.VMID, a.Cores, a.MemoryMiB, a.SwapMiB = "pve", 105, 4, 2048, 0
				a.RootFS = manifest.RootFS{Storage: "fast", Size: 1536 * manifest.GiB}
				a.Network = manifest.Network{Bridge: "vmbr1", IP: "192.168.1.50/24", Gateway: "192.168.1.1",
					DNS: []string{"1.1.1.1", "2606:4700::1111"}}
				a.Tags = []string{"web", "prod+eu"}
				a.OnBoot = true
				a.Description = "costs ${HOME} a month"
				a.Volumes = []manifest.Volume{
					{Name: "data", Storage: "local-lvm", Size: 512 * manifest.MiB, Mount: "/srv/data", Reclaim: manifest.ReclaimDelete},
					{Name: "home", Storage: "local-zfs", Mount: "/home", Backup: true, Reclaim: manifest.ReclaimRetain,
						Adopt: "local-zfs:subvol-999-disk-0"},
					{Name: "logs", Storage: "local-zfs", Size: 2 * manifest.GiB, Mount: "/var/log/app", Backup: true,
						Reclaim: manifest.ReclaimRetain, Adopt: "local-zfs:vm-999-disk-3"},
				}
			})},
		{"privileged without features", `
apps:
  - name: web
    template: debian-12-standard_12.12-1_amd64.tar.zst
    unprivileged: false
    features: { nesting: false }`,
			with(func(a *manifest.App) { a.Unprivileged = false })},
		{"references", `
apps:
  - name: web
    node: ${env:NODE}
    template: debian-12-standard_12.12-1_amd64.tar.zst
    password: ${file:~/.config/corral/root.pw}
    ssh:
      publicKeys:
        - ${file:~/.ssh/keys.pub}
        - "` + key1 + `"`,
			with(func(a *manifest.App) {
				a.Node = "pve2"
				a.Password = manifest.NewSecret("${file:~/.config/corral/root.pw}", filePW)
				a.SSH.PublicKeys = []string{key1, key2, key1}
			})},
		{"aliases", `
apps:
  - name: web
    template: &tmpl debian-12-standard_12.12-1_amd64.tar.zst
    tags: &tags [a, b]
  - name: api
    template: *tmpl
    tags: *tags`,
			with(func(a *manifest.App) { a.Tags = []string{"a", "b"} })},
	}
}()

type validCase struct {
	name string
	yaml string
	want manifest.App
}

// TestParse_valid covers defaults and the normalizations Parse performs.
func TestParse_valid(t *testing.T) {
	tests := validCases
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := manifest.Parse("corral.yaml", []byte(tt.yaml), testOptions())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, f.Apps[0], ignorePos); diff != "" {
				t.Errorf("app (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParse_positions(t *testing.T) {
	f, err := manifest.Parse("dir/corral.yaml", []byte("apps:\n  - name: web\n    template: a.tar.gz\n    volumes:\n      - name: data\n        size: 1G\n        mount: /data\n"), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	a := f.Apps[0]
	if got, want := a.Pos.String(), "dir/corral.yaml:2:5"; got != want {
		t.Errorf("app Pos=%s, want %s", got, want)
	}
	if got, want := a.Volumes[0].Pos.String(), "dir/corral.yaml:5:9"; got != want {
		t.Errorf("volume Pos=%s, want %s", got, want)
	}
}

func TestFile_App(t *testing.T) {
	f, err := manifest.Parse("corral.yaml", []byte("apps:\n  - {name: web, template: a.tar.gz}\n  - {name: db, template: b.tar.gz}\n"), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	a, ok := f.App("db")
	if !ok || a.Template != "local:vztmpl/b.tar.gz" {
		t.Fatalf(`App("db")=%+v, %v`, a, ok)
	}
	if got, want := a.Hostname(), "db"; got != want {
		t.Errorf("Hostname()=%q, want %q", got, want)
	}
	if _, ok := f.App("nope"); ok {
		t.Error(`App("nope") found an app`)
	}
}

func TestNetwork_DHCP(t *testing.T) {
	if !(manifest.Network{IP: "dhcp"}).DHCP() {
		t.Error("dhcp is not DHCP")
	}
	if (manifest.Network{IP: "10.0.0.2/24"}).DHCP() {
		t.Error("a static address is DHCP")
	}
}
