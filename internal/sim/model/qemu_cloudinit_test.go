package model

import (
	"reflect"
	"strings"
	"testing"
)

// TestQemuCloudInit reads a VM config as qemu-server's cloud-init code
// does: the name (or VM<vmid>) as host name, URL-decoded keys one per
// line, netN's MAC from its model key with ipconfigN's addresses, and
// the errors a bad value gives.
func TestQemuCloudInit(t *testing.T) {
	t.Parallel()
	got, err := qemuCloudInit(100, map[string]string{
		"name": "web", "ciuser": "ops", "cipassword": "$5$salt$hash",
		"sshkeys":   "ssh-ed25519%20AAAAC3Nza%20me%40laptop%0Assh-rsa%20AAAAB3%20other%0A",
		"net0":      "virtio=BC:24:11:AA:BB:CC,bridge=vmbr0,firewall=1",
		"ipconfig0": "ip=dhcp",
		"net2":      "model=e1000,macaddr=BC:24:11:00:00:02,bridge=vmbr0",
		"ipconfig2": "ip=10.0.0.5/24,gw=10.0.0.1,ip6=auto",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := VMCloudInit{Hostname: "web", User: "ops", Password: "$5$salt$hash",
		SSHKeys: []string{"ssh-ed25519 AAAAC3Nza me@laptop", "ssh-rsa AAAAB3 other"},
		Nets: []VMCloudNet{{Name: "eth0", MAC: "BC:24:11:AA:BB:CC", IP: "dhcp"},
			{Name: "eth2", MAC: "BC:24:11:00:00:02", IP: "10.0.0.5/24", GW: "10.0.0.1", IP6: "auto"}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("qemuCloudInit =\n%+v\nwant\n%+v", got, want)
	}
	if got, _ := qemuCloudInit(123, map[string]string{}); got.Hostname != "VM123" || got.SSHKeys != nil || got.Nets != nil {
		t.Errorf("unnamed VM: %+v, want host name VM123 and nothing else", got)
	}
	for key, bad := range map[string]string{"sshkeys": "ssh-rsa%zz", "net0": "virtio=A,virtio=B", "ipconfig0": "dhcp"} {
		conf := map[string]string{"net0": "virtio=BC:24:11:AA:BB:CC", key: bad}
		if _, err := qemuCloudInit(100, conf); err == nil {
			t.Errorf("%s=%q: no error", key, bad)
		}
	}
}

// TestCloudInitData checks the seed's files as qemu-server writes them
// (what the real runtime's drive holds and the dump answers):
// the host name, user, keys and expiry in user-data; a DHCP and a
// static entry, keyed by lower-case MAC, in network-config.
func TestCloudInitData(t *testing.T) {
	t.Parallel()
	ci := VMCloudInit{Hostname: "web", User: "ops", Password: "$5$x$y", SSHKeys: []string{"ssh-ed25519 AAAA a@b", "ssh-rsa BBBB c@d"},
		Nets: []VMCloudNet{{Name: "eth0", MAC: "BC:24:11:AA:BB:CC", IP: "dhcp"}, {Name: "eth1", MAC: "BC:24:11:00:00:02", IP: "10.0.0.5/24", GW: "10.0.0.1", IP6: "auto"}}}
	u := ci.UserData()
	for _, w := range []string{"#cloud-config\n", "hostname: web\n", "fqdn: web\n", "user: ops\n", "password: $5$x$y\n",
		"ssh_authorized_keys:\n  - ssh-ed25519 AAAA a@b\n  - ssh-rsa BBBB c@d\n", "chpasswd:\n  expire: False\n", "package_upgrade: false\n"} {
		if !strings.Contains(u, w) {
			t.Errorf("user-data lacks %q:\n%s", w, u)
		}
	}
	n := ci.NetworkConfig()
	for _, w := range []string{"version: 1\n", "name: eth0\n      mac_address: 'bc:24:11:aa:bb:cc'\n      subnets:\n      - type: dhcp4\n",
		"- type: static\n        address: '10.0.0.5/24'\n        gateway: '10.0.0.1'\n", "- type: ipv6_slaac\n"} {
		if !strings.Contains(n, w) {
			t.Errorf("network-config lacks %q:\n%s", w, n)
		}
	}
	if m := ci.MetaData(); !strings.HasPrefix(m, "instance-id: ") || len(m) != len("instance-id: ")+40+1 {
		t.Errorf("meta-data %q, want the data's SHA-1 as instance-id", m)
	}
	if u := ci.userData(true); !strings.Contains(u, "password: **********\n") {
		t.Errorf("masked user-data shows the password:\n%s", u)
	}
}

// TestVMRecordCloudInit follows cloudinit_record_changed through a
// running VM's changes: the drive's value is kept once, a key added
// and removed again leaves nothing, a value changed back drops its
// record, keys the drive does not carry are not recorded.
func TestVMRecordCloudInit(t *testing.T) {
	t.Parallel()
	s := func(v string) *string { return &v }
	for _, tc := range []struct {
		name  string
		steps [][3]*string // key, old, new
		want  map[string]string
	}{
		{"changed twice", [][3]*string{{s("ciuser"), s("a"), s("b")}, {s("ciuser"), s("b"), s("c")}}, map[string]string{"ciuser": "a"}},
		{"changed back", [][3]*string{{s("ciuser"), s("a"), s("b")}, {s("ciuser"), s("b"), s("a")}}, map[string]string{}},
		{"added", [][3]*string{{s("sshkeys"), nil, s("k")}, {s("nameserver"), nil, s("1.1.1.1")}}, map[string]string{"added": "nameserver,sshkeys"}},
		{"added then removed", [][3]*string{{s("sshkeys"), nil, s("k")}, {s("sshkeys"), s("k"), nil}}, map[string]string{}},
		{"removed then set again", [][3]*string{{s("ipconfig0"), s("ip=dhcp"), nil}, {s("ipconfig0"), nil, s("ip=10.0.0.2/24")}}, map[string]string{"ipconfig0": "ip=dhcp"}},
		{"removed", [][3]*string{{s("net1"), s("virtio=X"), nil}}, map[string]string{"net1": "virtio=X"}},
		{"not a cloud-init key", [][3]*string{{s("memory"), s("512"), s("1024")}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vm := &VM{}
			for _, st := range tc.steps {
				vmRecordCloudInit(vm, *st[0], st[1], st[2])
			}
			var got map[string]string
			if vm.CloudInit != nil {
				got = vm.CloudInit.Values
				if got == nil {
					got = map[string]string{}
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("record = %v, want %v", got, tc.want)
			}
		})
	}
}
