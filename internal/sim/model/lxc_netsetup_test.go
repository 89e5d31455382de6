package model

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/testenv"
)

const debianTemplateInterfaces = "# interfaces(5) file used by ifup(8) and ifdown(8)\n# Include files from /etc/network/interfaces.d:\nsource /etc/network/interfaces.d/*\n"

// TestCTRenderInterfaces: pve-container's Debian setup_network, from the
// CT's current file (Debian 12's, or a previous setup's) and its netN.
func TestCTRenderInterfaces(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		old  string
		conf map[string]string
	}{
		{"dhcp-no-file", "", map[string]string{"net0": "name=eth0,bridge=vmbr0,ip=dhcp"}},
		{"debian12-static-ip6-manual", debianTemplateInterfaces, map[string]string{
			"net0": "name=eth0,bridge=vmbr0,ip=192.168.10.5/24,gw=192.168.10.1,ip6=manual",
			"net1": "name=eth1,bridge=vmbr0,ip=dhcp,ip6=fd00::5/64,gw6=fd00::1"}},
		{"changed-static-keeps-attrs", "auto lo\niface lo inet loopback\n\nauto eth0\niface eth0 inet static\n\taddress 192.168.10.5/24\n\tgateway 192.168.10.1\n\tmtu 1400\n\nauto eth9\niface eth9 inet manual\n",
			map[string]string{"net0": "name=eth0,bridge=vmbr0,ip=10.1.2.3/16,gw=10.1.0.1"}},
		{"gateway-outside", debianTemplateInterfaces, map[string]string{"net0": "name=eth0,bridge=vmbr0,ip=10.1.2.3/24,gw=10.9.0.1"}},
		{"gateway-outside-again", "auto lo\niface lo inet loopback\niface lo inet6 loopback\n\nauto eth0\niface eth0 inet static\n\taddress 10.1.2.3/24\n# --- BEGIN PVE ---\n\tpost-up ip route add 10.9.0.1 dev eth0\n\tpost-up ip route add default via 10.9.0.1 dev eth0\n\tpre-down ip route del default via 10.9.0.1 dev eth0\n\tpre-down ip route del 10.9.0.1 dev eth0\n# --- END PVE ---\n\n",
			map[string]string{"net0": "name=eth0,bridge=vmbr0,ip=10.1.2.3/24,gw=10.9.0.1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ctRenderInterfaces(tt.old, ctNetworks(tt.conf))
			testenv.Golden(t, filepath.Join("testdata", "netsetup", tt.name+".interfaces"), []byte(got))
			// A second setup (the next start) changes nothing.
			if again := ctRenderInterfaces(got, ctNetworks(tt.conf)); again != got {
				t.Errorf("not stable at the next start:\n%s", again)
			}
		})
	}
}

// TestCTSetDNS: resolv.conf from nameserver/searchdomain, or the host's.
func TestCTSetDNS(t *testing.T) {
	t.Parallel()
	host := filepath.Join(t.TempDir(), "resolv.conf")
	os.WriteFile(host, []byte("# host\nsearch corp.example\nnameserver 192.0.2.1\nnameserver 192.0.2.2\nnameserver 192.0.2.3\nnameserver 192.0.2.4\n"), 0o644)
	defer func(p string) { hostResolvConf = p }(hostResolvConf)
	hostResolvConf = host
	tests := []struct {
		name      string
		old       string
		conf      map[string]string
		want      string
		symlinked bool
	}{
		{"host's", "nameserver 10.255.255.53\n", map[string]string{},
			"# --- BEGIN PVE ---\nsearch corp.example\nnameserver 192.0.2.1\nnameserver 192.0.2.2\nnameserver 192.0.2.3\n# --- END PVE ---\n", false},
		{"configured", "", map[string]string{"nameserver": "1.1.1.1 2606:4700::1111", "searchdomain": "a.example,b.example"},
			"# --- BEGIN PVE ---\nsearch a.example b.example\nnameserver 1.1.1.1\nnameserver 2606:4700::1111\n# --- END PVE ---\n", false},
		{"section replaced, rest kept", "options edns0\n# --- BEGIN PVE ---\nnameserver 9.9.9.9\n# --- END PVE ---\n", map[string]string{"nameserver": "1.1.1.1"},
			"options edns0\n# --- BEGIN PVE ---\nsearch corp.example\nnameserver 1.1.1.1\n# --- END PVE ---\n", false},
		{"a symlink is replaced, never followed", "", map[string]string{"nameserver": "1.1.1.1", "searchdomain": ""},
			"# --- BEGIN PVE ---\nnameserver 1.1.1.1\n# --- END PVE ---\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			os.MkdirAll(filepath.Join(root, "etc"), 0o755)
			p := filepath.Join(root, "etc", "resolv.conf")
			outside := filepath.Join(t.TempDir(), "outside")
			if tt.symlinked {
				os.WriteFile(outside, []byte("keep\n"), 0o644)
				os.Symlink(outside, p)
			} else if tt.old != "" {
				os.WriteFile(p, []byte(tt.old), 0o644)
			}
			if err := ctSetDNS(root, tt.conf); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(p)
			if string(got) != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", got, tt.want)
			}
			if tt.symlinked {
				if b, _ := os.ReadFile(outside); string(b) != "keep\n" {
					t.Errorf("the symlink's target was written: %q", b)
				}
			}
		})
	}
}

// TestCluster_CreateCT_networkSetup: on the tiny template, create writes
// /etc/network/interfaces and /etc/resolv.conf from net0, nameserver and
// searchdomain; GuestPreStart (each start) writes a changed net0.
func TestCluster_CreateCT_networkSetup(t *testing.T) {
	t.Parallel()
	k := newOpsKit(t)
	task := ctTestCreate(k, kitOperator, map[string]string{
		"vmid": "106", "ostemplate": DefaultTemplate, "rootfs": "local-lvm:2", "features": "nesting=1",
		"net0":       "name=eth0,bridge=vmbr0,ip=192.168.10.5/24,gw=192.168.10.1,ip6=manual",
		"nameserver": "192.0.2.53", "searchdomain": "lan.example",
	})
	if task.ExitStatus != "OK" {
		t.Fatalf("exitstatus = %q; log:\n%s", task.ExitStatus, strings.Join(task.Log, "\n"))
	}
	dir, _ := k.c.VolumePath("pve", "local-lvm:vm-106-disk-0")
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if got, want := read("etc/network/interfaces"), "auto lo\niface lo inet loopback\niface lo inet6 loopback\n\nauto eth0\niface eth0 inet static\n\taddress 192.168.10.5/24\n\tgateway 192.168.10.1\n\niface eth0 inet6 manual\n\n"; got != want {
		t.Errorf("interfaces after create:\n%s\nwant:\n%s", got, want)
	}
	if got, want := read("etc/resolv.conf"), "# --- BEGIN PVE ---\nsearch lan.example\nnameserver 192.0.2.53\n# --- END PVE ---\n"; got != want {
		t.Errorf("resolv.conf after create:\n%s\nwant:\n%s", got, want)
	}
	k.c.mu.Lock()
	k.c.st.Guests[106].Config["net0"] = "name=eth0,bridge=vmbr0,ip=dhcp"
	k.c.mu.Unlock()
	if err := k.c.GuestPreStart(106, dir); err != nil {
		t.Fatal(err)
	}
	if got, want := read("etc/network/interfaces"), "auto lo\niface lo inet loopback\niface lo inet6 loopback\n\nauto eth0\niface eth0 inet dhcp\n\n"; got != want {
		t.Errorf("interfaces after a changed net0 and a start:\n%s\nwant:\n%s", got, want)
	}
}
