package cli

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// vmFwManifest is a VM app with a firewall of two rules; the second
// rule's dport is %s.
const vmFwManifest = `project: vmfw
apps:
  - name: web
    kind: vm
    memory: 512
    network: {ip: 10.20.0.51/24, gateway: 10.20.0.1}
    vm: {disk: {size: 2G}}
    firewall:
      policy_in: DROP
      rules:
        - {type: in, action: ACCEPT, macro: SSH, source: 10.0.0.0/8, comment: admins}
        - {type: in, action: ACCEPT, proto: tcp, dport: "%s", iface: net0}
`

// vmFwRules are VM vmid's firewall rules, read as root.
func vmFwRules(t *testing.T, c *cluster, vmid int) []map[string]any {
	t.Helper()
	var rules []map[string]any
	if err := c.pveRoot().Get(context.Background(), fmt.Sprintf("/nodes/pve/qemu/%d/firewall/rules", vmid), nil, &rules); err != nil {
		t.Fatal(err)
	}
	return rules
}

// TestVMAppFirewall (issue 34): a kind: vm app's firewall: goes through
// plan and apply as a container's, under the VM's qemu directory: the
// options and rules are in place before the VM first starts, its net0
// carries firewall=1, a second plan is empty, a changed rule is one
// in-place update, a rule added outside corral is drift that apply
// removes.
func TestVMAppFirewall(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.offerVMImage()
	m := writeManifest(t, fmt.Sprintf(vmFwManifest, "80,443"))
	r := c.run("plan", "-f", m)
	for _, want := range []string{"~ firewall policy_in: (unset) → DROP", "+ firewall rule 1: IN ACCEPT -i net0 -p tcp -dport 80,443"} {
		if !strings.Contains(r.stdout+r.stderr, want) {
			t.Errorf("plan of the new VM app does not mention %q:\n%s%s", want, r.stdout, r.stderr)
		}
	}
	out := c.mustRun("apply", "-f", m, "--auto-approve")
	if fw, start := strings.Index(out.stderr+out.stdout, "firewall"), strings.Index(out.stderr+out.stdout, "start"); fw < 0 || start >= 0 && start < fw {
		t.Errorf("apply did not write the firewall before the start:\n%s%s", out.stdout, out.stderr)
	}
	vmid, status, _ := c.vmOf(m)
	if status != "running" {
		t.Fatalf("vm %d is %s", vmid, status)
	}
	if rules := vmFwRules(t, c, vmid); len(rules) != 2 || rules[0]["macro"] != "SSH" || rules[1]["dport"] != "80,443" {
		t.Fatalf("the VM's rules after apply: %v", rules)
	}
	var opts map[string]any
	if err := c.pveRoot().Get(context.Background(), fmt.Sprintf("/nodes/pve/qemu/%d/firewall/options", vmid), nil, &opts); err != nil {
		t.Fatal(err)
	}
	if opts["enable"] != float64(1) || opts["policy_in"] != "DROP" {
		t.Errorf("the VM's firewall options: %v", opts)
	}
	conf, err := c.pveRoot().VMConfigOf(context.Background(), "pve", vmid, false)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(conf.Values["net0"], "firewall=1") {
		t.Errorf("net0 = %q, want firewall=1", conf.Values["net0"])
	}
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Fatalf("plan right after apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	m2 := writeManifest(t, fmt.Sprintf(vmFwManifest, "8080"))
	r = c.run("plan", "-f", m2)
	if r.code != ExitChanges || !strings.Contains(r.stdout, "~ firewall rule 1: IN ACCEPT -i net0 -p tcp -dport 80,443 → IN ACCEPT -i net0 -p tcp -dport 8080") || strings.Contains(r.stdout, "replace") {
		t.Fatalf("plan of a changed rule: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.mustRun("apply", "-f", m2, "--auto-approve")
	if rules := vmFwRules(t, c, vmid); len(rules) != 2 || rules[1]["dport"] != "8080" {
		t.Fatalf("the VM's rules after the change: %v", rules)
	}

	base := fmt.Sprintf("/nodes/pve/qemu/%d/firewall", vmid)
	if err := c.pveClient().Post(context.Background(), base+"/rules", url.Values{"type": {"in"}, "action": {"ACCEPT"}, "proto": {"udp"}, "dport": {"53"}, "enable": {"1"}}, nil); err != nil {
		t.Fatal(err)
	}
	if r := c.run("plan", "-f", m2); r.code != ExitChanges {
		t.Fatalf("plan after a rule added outside corral: exit %d, want %d (drift)\n%s%s", r.code, ExitChanges, r.stdout, r.stderr)
	}
	c.mustRun("apply", "-f", m2, "--auto-approve")
	if rules := vmFwRules(t, c, vmid); len(rules) != 2 || rules[0]["macro"] != "SSH" {
		t.Fatalf("the VM's rules after restoring: %v", rules)
	}
	if r := c.run("plan", "-f", m2); r.code != 0 {
		t.Fatalf("plan after restoring: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.mustRun("destroy", "-f", m2, "--auto-approve")
}
