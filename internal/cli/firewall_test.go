package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/sim/model"
)

// fwCLIManifest is an app in pool %s with a firewall of three rules; the
// second rule's dport is %s.
const fwCLIManifest = `project: fw
pool: %s
apps:
  - name: web
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    memory: 256
    firewall:
      policy_in: DROP
      rules:
        - {type: in, action: ACCEPT, macro: SSH, source: 10.0.0.0/8, comment: admins}
        - {type: in, action: ACCEPT, proto: tcp, dport: "%s", iface: net0}
        - {type: out, action: REJECT, proto: icmp, icmp_type: echo-request}
`

// TestPoolAndFirewall_throughTheCLI (issue 33): pool: and firewall:
// round-trip through corral plan and apply over HTTPS with no drift; a
// rule changed in the manifest is one in-place rule update; a rule added
// in the web UI is drift that apply removes; a new pool: moves the
// container; the pool stays when the app is destroyed (an admin's
// object), without the container.
func TestPoolAndFirewall_throughTheCLI(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	cl := c.srv.Cluster()
	m := writeManifest(t, fmt.Sprintf(fwCLIManifest, "team", "80,443"))
	r := c.run("plan", "-f", m)
	for _, want := range []string{"+ pool: team (created)", "~ firewall policy_in: (unset) → DROP", "+ firewall rule 1: IN ACCEPT -i net0 -p tcp -dport 80,443"} {
		if !strings.Contains(r.stdout+r.stderr, want) {
			t.Errorf("plan of the new app does not mention %q:\n%s%s", want, r.stdout, r.stderr)
		}
	}
	c.mustRun("apply", "-f", m, "--auto-approve")
	if r := c.run("plan", "-f", m); r.code != 0 {
		t.Fatalf("plan right after apply: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	vmid := c.vmidOf(m, "web")
	if got := poolMembers(t, c, "team"); !slices.Equal(got, []int{vmid}) {
		t.Fatalf("pool team holds %v, want [%d]", got, vmid)
	}
	if rules := fwRules(t, c, vmid); len(rules) != 3 || rules[1]["dport"] != "80,443" || rules[0]["macro"] != "SSH" {
		t.Fatalf("rules after apply: %v", rules)
	}

	// A changed rule in the manifest: one rule updated in place.
	m2 := writeManifest(t, fmt.Sprintf(fwCLIManifest, "team", "8080"))
	r = c.run("plan", "-f", m2)
	if r.code != 2 || !strings.Contains(r.stdout, "~ firewall rule 1: IN ACCEPT -i net0 -p tcp -dport 80,443 → IN ACCEPT -i net0 -p tcp -dport 8080") || strings.Contains(r.stdout, "rule 0") {
		t.Fatalf("plan of a changed rule: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	r = c.run("plan", "-f", m2, "-o", "json")
	var pj struct {
		Changes []struct {
			Pool     *struct{ To string } `json:"pool"`
			Firewall struct {
				Rules []struct {
					Op       string
					Pos      int
					Old, New string
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &pj); err != nil || len(pj.Changes) != 1 {
		t.Fatalf("plan -o json: %v\n%s", err, r.stdout)
	}
	if ch := pj.Changes[0]; ch.Pool != nil || len(ch.Firewall.Rules) != 1 || ch.Firewall.Rules[0].Op != "update" || ch.Firewall.Rules[0].Pos != 1 || !strings.HasSuffix(ch.Firewall.Rules[0].New, "-dport 8080") {
		t.Fatalf("plan -o json of a changed rule: %+v", ch)
	}
	c.mustRun("apply", "-f", m2, "--auto-approve")
	if rules := fwRules(t, c, vmid); len(rules) != 3 || rules[1]["dport"] != "8080" {
		t.Fatalf("rules after the change: %v", rules)
	}

	// A rule added in the web UI is drift; apply puts the list back.
	base := fmt.Sprintf("/nodes/pve/lxc/%d/firewall", vmid)
	if err := c.pveClient().Post(context.Background(), base+"/rules", url.Values{"type": {"in"}, "action": {"ACCEPT"}, "proto": {"udp"}, "dport": {"53"}, "enable": {"1"}}, nil); err != nil {
		t.Fatal(err)
	}
	if r := c.run("plan", "-f", m2); r.code != 2 {
		t.Fatalf("plan after a web-UI rule: exit %d, want 2 (drift)\n%s%s", r.code, r.stdout, r.stderr)
	}
	c.mustRun("apply", "-f", m2, "--auto-approve")
	if rules := fwRules(t, c, vmid); len(rules) != 3 || rules[0]["macro"] != "SSH" {
		t.Fatalf("rules after restoring: %v", rules)
	}
	if r := c.run("plan", "-f", m2); r.code != 0 {
		t.Fatalf("plan after restoring: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	// Another pool: the container moves; the old pool stays.
	m3 := writeManifest(t, fmt.Sprintf(fwCLIManifest, "ops", "8080"))
	c.mustRun("apply", "-f", m3, "--auto-approve")
	if got, old := poolMembers(t, c, "ops"), poolMembers(t, c, "team"); !slices.Equal(got, []int{vmid}) || len(old) != 0 {
		t.Fatalf("after moving pools: ops %v, team %v", got, old)
	}
	if r := c.run("plan", "-f", m3); r.code != 0 {
		t.Fatalf("plan after moving pools: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	c.mustRun("destroy", "-f", m3, "--auto-approve")
	if got := poolMembers(t, c, "ops"); len(got) != 0 {
		t.Errorf("pool ops after destroy holds %v", got)
	}
	if _, err := cl.Pool("ops", ""); err != nil {
		t.Errorf("pool ops gone after destroy: %v", err)
	}
}

// TestPoolPreflight_tokenWithoutPoolAllocate (issue 33): a token whose
// role lacks Pool.Allocate is stopped before any change, and the message
// names the privilege and its path.
func TestPoolPreflight_tokenWithoutPoolAllocate(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	cl := c.srv.Cluster()
	root := model.Auth{UserID: "root@pam"}
	privs := slices.DeleteFunc(slices.Clone(model.OperatorPrivileges), func(p string) bool { return p == "Pool.Allocate" })
	if err := cl.AddRole("NoPool", privs); err != nil {
		t.Fatal(err)
	}
	if err := cl.AddUser("nopool@pve", "", nil); err != nil {
		t.Fatal(err)
	}
	_, secret, _, err := cl.AddToken("nopool@pve", "tok", true, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.UpdateACL(root, model.ACLUpdate{Path: "/", Roles: []string{"NoPool"}, Users: []string{"nopool@pve"}, Tokens: []string{"nopool@pve!tok"}, Propagate: true}); err != nil {
		t.Fatal(err)
	}
	m := writeManifest(t, fmt.Sprintf(fwCLIManifest, "team", "80"))
	tok := "nopool@pve!tok=" + secret
	var stdout, stderr bytes.Buffer
	code := Run(context.Background(), []string{"apply", "-f", m, "--auto-approve", "--endpoint", c.srv.URL(),
		"--api-token", tok, "--fingerprint", c.srv.Fingerprint()}, strings.NewReader(""), &stdout, &stderr)
	r := result{code, stdout.String(), stderr.String()}
	out := r.stdout + r.stderr
	if r.code == 0 || !strings.Contains(out, "Pool.Allocate") || !strings.Contains(out, "/pool/team") {
		t.Fatalf("apply without Pool.Allocate: exit %d\n%s", r.code, out)
	}
	if st := c.status(m); len(st.Apps[0].Containers) != 0 {
		t.Fatalf("the refused apply changed things: %+v", st.Apps[0])
	}
	if strings.Contains(out, secret) {
		t.Fatal("token secret printed")
	}
	r = c.runToken(tok, "doctor", "-f", m)
	if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "Pool.Allocate") {
		t.Fatalf("doctor without Pool.Allocate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// poolMembers are the VMIDs in pool id, as root reads them.
func poolMembers(t *testing.T, c *cluster, id string) []int {
	t.Helper()
	var p struct {
		Members []struct {
			VMID int `json:"vmid"`
		} `json:"members"`
	}
	if err := c.pveRoot().Get(context.Background(), "/pools/"+id, nil, &p); err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, m := range p.Members {
		out = append(out, m.VMID)
	}
	return out
}

// fwRules is the container's rule list as PVE returns it.
func fwRules(t *testing.T, c *cluster, vmid int) []map[string]any {
	t.Helper()
	var rules []map[string]any
	if err := c.pveRoot().Get(context.Background(), fmt.Sprintf("/nodes/pve/lxc/%d/firewall/rules", vmid), nil, &rules); err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(rules, func(a, b map[string]any) int { return int(a["pos"].(float64) - b["pos"].(float64)) })
	return rules
}
