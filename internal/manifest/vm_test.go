package manifest_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/manifest"
)

// TestVMApp: a kind: vm app needs no template, takes the vm: keys with
// their defaults (the emulator's Debian 12 image, 8G on local-lvm,
// ballooning off, user debian, the agent on) and the app's own cores,
// memory, network and keys.
func TestVMApp(t *testing.T) {
	y := "apps:\n  - name: web\n    kind: vm\n    memory: 2048\n    ssh: {publicKeys: [\"" + key1 + "\"]}\n    network: {ip: 10.0.0.5/24, gateway: 10.0.0.1}\n"
	f, err := manifest.Parse("corral.yaml", []byte(y), testOptions())
	if err != nil {
		t.Fatal(err)
	}
	a := f.Apps[0]
	want := &manifest.VM{Image: manifest.DefaultVMImage, DiskStorage: "local-lvm", DiskSize: 8 * manifest.GiB, User: "debian", Agent: true, AddressWait: 5 * time.Minute, BIOS: manifest.BIOSSeaBIOS}
	if !a.IsVM() || a.KindName() != "vm" || a.Template != "" || !cmp.Equal(a.VM, want) {
		t.Fatalf("kind %q template %q vm %+v; want vm, no template, %+v", a.Kind, a.Template, a.VM, want)
	}
	if a.MemoryMiB != 2048 || a.Network.IP != "10.0.0.5/24" || len(a.SSH.PublicKeys) != 1 {
		t.Fatalf("app fields %+v", a)
	}
	y = "apps:\n  - name: efi\n    kind: vm\n    vm: {bios: ovmf}\n"
	if f, err = manifest.Parse("corral.yaml", []byte(y), testOptions()); err != nil || f.Apps[0].VM.BIOS != manifest.BIOSOVMF {
		t.Fatalf("vm.bios: ovmf: %+v, %v", f, err)
	}
	y = "apps:\n  - name: db\n    kind: vm\n    volumes: [{name: data, size: 2G, reclaim: delete}]\n"
	if f, err = manifest.Parse("corral.yaml", []byte(y), testOptions()); err != nil || len(f.Apps[0].Volumes) != 1 ||
		f.Apps[0].Volumes[0].Size != 2*manifest.GiB || f.Apps[0].Volumes[0].Mount != "" || f.Apps[0].Volumes[0].Reclaim != manifest.ReclaimDelete {
		t.Fatalf("a vm app's volume: %+v, %v", f, err)
	}
	y = "apps:\n  - name: web\n    template: a.tar.gz\n"
	if f, err = manifest.Parse("corral.yaml", []byte(y), testOptions()); err != nil || f.Apps[0].KindName() != manifest.KindCT || f.Apps[0].VM != nil {
		t.Fatalf("a ct app: %+v, %v", f, err)
	}
}

// TestVMAppRefusals: a container's keys on a VM app are refused each
// with why, a VM volume's mount and adopt too, vm:
// on a container is refused, and a container still needs its template
// and its volumes their mount.
func TestVMAppRefusals(t *testing.T) {
	for _, tt := range []struct{ name, yaml, want string }{
		{"volume mount", "apps:\n  - name: web\n    kind: vm\n    volumes: [{name: data, size: 1G, mount: /data}]\n",
			"apps[0].volumes[0].mount: a kind: vm app's volume takes no mount: it is attached to the VM as a disk"},
		{"volume adopt", "apps:\n  - name: web\n    kind: vm\n    volumes: [{name: data, adopt: 'local-lvm:vm-9-disk-1'}]\n",
			"apps[0].volumes[0].adopt: a kind: vm app's volume takes no adopt"},
		{"ct volume without mount", "apps:\n  - name: web\n    template: a.tar.gz\n    volumes: [{name: data, size: 1G}]\n",
			"apps[0].volumes[0].mount: required key is missing"},
		{"features", "apps:\n  - name: web\n    kind: vm\n    features: {nesting: true}\n", "apps[0].features: a kind: vm app takes no features"},
		{"unprivileged", "apps:\n  - name: web\n    kind: vm\n    unprivileged: false\n", "apps[0].unprivileged: a kind: vm app takes no unprivileged"},
		{"template", "apps:\n  - name: web\n    kind: vm\n    template: a.tar.gz\n", "apps[0].template: a kind: vm app takes no template: a VM boots from vm.image"},
		{"vm on ct", "apps:\n  - name: web\n    template: a.tar.gz\n    vm: {balloon: 0}\n", "apps[0].vm: vm: is only for a kind: vm app"},
		{"ct without template", "apps:\n  - name: web\n    kind: ct\n", "apps[0].template: required key is missing"},
		{"balloon over memory", "apps:\n  - name: web\n    kind: vm\n    memory: 1024\n    vm: {balloon: 2048}\n", "apps[0].vm.balloon: balloon 2048 MiB is more than the app's memory (1024 MiB)"},
		{"bad kind", "apps:\n  - name: web\n    kind: kvm\n", "apps[0].kind"},
		{"bad bios", "apps:\n  - name: web\n    kind: vm\n    vm: {bios: uefi}\n", "apps[0].vm.bios"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := manifest.Parse("corral.yaml", []byte(tt.yaml), testOptions())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v\nwant it to contain %q", err, tt.want)
			}
		})
	}
}

// TestVMAppGuestWork: a kind: vm app takes provision: and health: as a
// container app does (its steps and checks built the same), and a
// compose step in a VM sets no container feature flags (Docker in a VM
// needs neither nesting nor keyctl).
func TestVMAppGuestWork(t *testing.T) {
	for _, tt := range []struct {
		name, yaml      string
		steps, checks   int
		nesting, keyctl bool
	}{
		{"provision", "    provision:\n      - run: echo hi > /srv/hi\n      - file: {path: /etc/app.conf, content: \"a=1\\n\"}\n", 2, 0, false, false},
		{"health", "    health:\n      - tcp: 127.0.0.1:22\n", 0, 1, false, false},
		{"both", "    provision:\n      - run: apt-get install -y nginx\n    health:\n      - http: http://127.0.0.1/\n", 1, 1, false, false},
		{"compose", "    provision:\n      - compose: {path: /srv/app/compose.yaml, content: \"services: {}\\n\"}\n", 1, 0, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			y := "apps:\n  - name: web\n    kind: vm\n" + tt.yaml
			f, err := manifest.Parse("corral.yaml", []byte(y), testOptions())
			if err != nil {
				t.Fatal(err)
			}
			a := f.Apps[0]
			if len(a.Provision) != tt.steps || len(a.Health) != tt.checks || a.Features.Nesting != tt.nesting || a.NeedsKeyctl != tt.keyctl {
				t.Fatalf("steps %d checks %d nesting %v keyctl %v; want %d %d %v %v", len(a.Provision), len(a.Health), a.Features.Nesting, a.NeedsKeyctl,
					tt.steps, tt.checks, tt.nesting, tt.keyctl)
			}
		})
	}
}
