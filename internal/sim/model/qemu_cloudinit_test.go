package model

import (
	"reflect"
	"testing"
)

// TestQemuCloudInit reads a VM config as qemu-server's cloud-init code
// does: the name (or VM<vmid>) as host name, URL-decoded keys one per
// line, netN's MAC from its model key with ipconfigN's addresses, and
// the errors a bad value gives.
func TestQemuCloudInit(t *testing.T) {
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
