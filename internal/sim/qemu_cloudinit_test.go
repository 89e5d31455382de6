package sim

import (
	"crypto/sha1"
	"encoding/hex"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
)

// TestQemu_cloudInitPending: GET .../cloudinit answers as
// cloudinit_pending from qemu-server's [special:cloudinit] record: a
// stopped VM's changes are the drive's at its next start (nothing
// pending); a running VM's are recorded (added, changed, deleted) until
// PUT .../cloudinit or a start regenerates the drive. The record is
// part of the config file, so it changes the digest.
func TestQemu_cloudInitPending(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	k.srv.Cluster().SetVMRuntime(nil) // state only
	root := k.root()
	p := vmParams("200")
	p.Set("ciuser", "debian")
	p.Set("sshkeys", "ssh-ed25519%20AAAA%20me%40host")
	p.Set("ipconfig0", "ip=dhcp")
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", p)
	k.ok(root, http.MethodPut, "/nodes/pve/qemu/200/config", url.Values{"ciuser": {"ops"}}, nil)
	sshkeys := "ssh-ed25519%20AAAA%20me%40host"
	k.wantCloudInit("200", []map[string]any{{"key": "ciuser", "value": "ops"}, {"key": "sshkeys", "value": sshkeys}})

	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/status/start", nil)
	before := k.vmConfig("200")["digest"]
	k.ok(root, http.MethodPut, "/nodes/pve/qemu/200/config", url.Values{"ciuser": {"admin"}, "cipassword": {"pw"}, "delete": {"sshkeys"}, "name": {"renamed"}}, nil)
	k.wantCloudInit("200", []map[string]any{
		{"key": "cipassword", "pending": "**********"},
		{"key": "ciuser", "value": "ops", "pending": "admin"},
		{"key": "sshkeys", "delete": float64(1)},
	})
	if k.vmConfig("200")["digest"] == before {
		t.Error("the [special:cloudinit] record left the digest as it was")
	}
	k.ok(root, http.MethodPut, "/nodes/pve/qemu/200/config", url.Values{"ciuser": {"ops"}}, nil) // back to the drive's value
	k.wantCloudInit("200", []map[string]any{
		{"key": "cipassword", "pending": "**********"},
		{"key": "ciuser", "value": "ops"},
		{"key": "sshkeys", "delete": float64(1)},
	})
	k.ok(root, http.MethodPut, "/nodes/pve/qemu/200/cloudinit", nil, nil)
	k.wantCloudInit("200", []map[string]any{{"key": "cipassword", "value": "**********"}, {"key": "ciuser", "value": "ops"}})

	k.ok(root, http.MethodPut, "/nodes/pve/qemu/200/config", url.Values{"ciuser": {"admin"}}, nil)
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/status/stop", nil)
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/200/status/start", nil)
	k.wantCloudInit("200", []map[string]any{{"key": "cipassword", "value": "**********"}, {"key": "ciuser", "value": "admin"}})
}

// wantCloudInit checks GET .../cloudinit of vmid, in the emulator's
// order (qemu-server's follows Perl's hash order).
func (k *e2e) wantCloudInit(vmid string, want []map[string]any) {
	k.t.Helper()
	var got []map[string]any
	k.ok(k.root(), http.MethodGet, "/nodes/pve/qemu/"+vmid+"/cloudinit", nil, &got)
	if !reflect.DeepEqual(got, want) {
		k.t.Fatalf("GET cloudinit = %v\nwant %v", got, want)
	}
}

// TestQemu_cloudInitDump: GET .../cloudinit/dump answers the files the
// cloud-init drive holds, the password masked for a caller without
// VM.Config.Cloudinit, the instance-id the digest of the unmasked data;
// VM.Audit is needed, type is one of user, network, meta.
func TestQemu_cloudInitDump(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	root := k.root()
	p := vmParams("200")
	p.Set("ciuser", "ops")
	p.Set("cipassword", "s3cret")
	p.Set("sshkeys", "ssh-ed25519%20AAAA%20me%40host%0Assh-rsa%20BBBB%20you%40host")
	p.Set("ipconfig0", "ip=10.0.0.5/24,gw=10.0.0.1")
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", p)
	mac := strings.TrimPrefix(strings.Split(k.vmConfig("200")["net0"].(string), ",")[0], "virtio=")
	dump := func(who e2eCaller, typ string) string {
		var s string
		k.ok(who, http.MethodGet, "/nodes/pve/qemu/200/cloudinit/dump", url.Values{"type": {typ}}, &s)
		return s
	}
	user, network := dump(root, "user"), dump(root, "network")
	if want := "#cloud-config\nhostname: vm200\nmanage_etc_hosts: true\nfqdn: vm200\nuser: ops\npassword: s3cret\n" +
		"ssh_authorized_keys:\n  - ssh-ed25519 AAAA me@host\n  - ssh-rsa BBBB you@host\n" +
		"chpasswd:\n  expire: False\nusers:\n  - default\npackage_upgrade: false\n"; user != want {
		t.Errorf("user =\n%s\nwant\n%s", user, want)
	}
	if want := "version: 1\nconfig:\n    - type: physical\n      name: eth0\n      mac_address: '" + strings.ToLower(mac) + "'\n" +
		"      subnets:\n      - type: static\n        address: '10.0.0.5/24'\n        gateway: '10.0.0.1'\n"; network != want {
		t.Errorf("network =\n%s\nwant\n%s", network, want)
	}
	sum := sha1.Sum([]byte(user + network))
	if got, want := dump(root, "meta"), "instance-id: "+hex.EncodeToString(sum[:])+"\n"; got != want {
		t.Errorf("meta = %q, want %q", got, want)
	}
	_, auditor := k.newUserToken("auditor@pve", "tok", false)
	k.ok(root, http.MethodPut, "/access/acl", url.Values{"path": {"/vms/200"}, "roles": {"PVEAuditor"}, "users": {"auditor@pve"}}, nil)
	if got := dump(auditor, "user"); !strings.Contains(got, "password: **********\n") || strings.Contains(got, "s3cret") {
		t.Errorf("the auditor's user data:\n%s", got)
	}
	if got := dump(auditor, "meta"); got != dump(root, "meta") {
		t.Errorf("the auditor's meta %q differs from root's", got)
	}
	_, nobody := k.newUserToken("nobody@pve", "tok", false)
	if r := k.do(nobody, http.MethodGet, "/nodes/pve/qemu/200/cloudinit/dump", url.Values{"type": {"user"}}); r.status != 403 {
		t.Errorf("without VM.Audit: %d %q", r.status, r.msg)
	}
	if r := k.do(root, http.MethodGet, "/nodes/pve/qemu/200/cloudinit/dump", url.Values{"type": {"vendor"}}); r.status != 400 || r.errs["type"] == "" {
		t.Errorf("type=vendor: %d %q %v", r.status, r.msg, r.errs)
	}
}
