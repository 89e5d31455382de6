package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/doctor"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/sim/model"
)

// doctorCluster is an HTTPS emulator plus a root client that sets up the
// narrow roles, users and tokens the tests need through the access API,
// as an administrator would with pveum.
type doctorCluster struct {
	*cluster
	root    *pve.Client
	secrets []string // every secret the tests know; none may be printed
}

func newDoctorCluster(t *testing.T) *doctorCluster {
	t.Helper()
	c := newCluster(t)
	creds := c.srv.Credentials()
	root := pvetest.Client(t, c.srv, creds.RootToken)
	d := &doctorCluster{cluster: c, root: root, secrets: []string{creds.RootPassword}}
	for _, tok := range []string{creds.RootToken, creds.OperatorToken} {
		_, secret, _ := strings.Cut(tok, "=")
		d.secrets = append(d.secrets, secret)
	}
	return d
}

func (d *doctorCluster) call(method, path string, params url.Values, out any) {
	d.t.Helper()
	ctx := context.Background()
	var err error
	switch method {
	case "POST":
		err = d.root.Post(ctx, path, params, out)
	case "PUT":
		err = d.root.Put(ctx, path, params, out)
	}
	if err != nil {
		d.t.Fatalf("%s %s: %v", method, path, err)
	}
}

func (d *doctorCluster) role(name string, privs []string) {
	d.call("POST", "/access/roles", url.Values{"roleid": {name}, "privs": {strings.Join(privs, ",")}}, nil)
}

func (d *doctorCluster) setRole(name string, privs []string) {
	d.call("PUT", "/access/roles/"+name, url.Values{"privs": {strings.Join(privs, ",")}}, nil)
}

// token creates user (if new) and a privilege-separated token, and
// returns user@realm!name=secret.
func (d *doctorCluster) token(user, name string) string {
	d.t.Helper()
	if err := d.root.Post(context.Background(), "/access/users", url.Values{"userid": {user}}, nil); err != nil && !strings.Contains(err.Error(), "already exists") {
		d.t.Fatalf("add user %s: %v", user, err)
	}
	var out struct {
		FullTokenID string `json:"full-tokenid"`
		Value       string `json:"value"`
	}
	d.call("POST", "/access/users/"+user+"/token/"+name, url.Values{"privsep": {"1"}}, &out)
	d.secrets = append(d.secrets, out.Value)
	return out.FullTokenID + "=" + out.Value
}

// acl grants role on path to the user and/or the token (empty: neither).
// operatorWithout makes role, the operator's privileges without drop,
// and a token ci of user holding it on / (granted to the user and the
// token both); it returns the token, as doctor runs with it.
func (d *doctorCluster) operatorWithout(role, user string, drop ...string) string {
	d.role(role, slices.DeleteFunc(slices.Clone(model.OperatorPrivileges), func(p string) bool { return slices.Contains(drop, p) }))
	tok := d.token(user, "ci")
	id, _, _ := strings.Cut(tok, "=")
	d.acl("/", role, user, id, true)
	return tok
}

func (d *doctorCluster) acl(path, role, user, tokenID string, propagate bool) {
	p := url.Values{"path": {path}, "roles": {role}, "propagate": {"0"}}
	if propagate {
		p.Set("propagate", "1")
	}
	if user != "" {
		p.Set("users", user)
	}
	if tokenID != "" {
		p.Set("tokens", tokenID)
	}
	d.call("PUT", "/access/acl", p, nil)
}

// corral runs corral with args and, when token is set, the connection
// flags for this emulator with that token; it fails the test if any known
// secret shows up in the output.
func (d *doctorCluster) corral(token string, pin bool, args ...string) result {
	d.t.Helper()
	full := slices.Clone(args)
	if token != "" {
		full = append(full, "--endpoint", d.srv.URL(), "--api-token", token)
		if pin {
			full = append(full, "--fingerprint", d.srv.Fingerprint())
		}
	}
	var out, errb bytes.Buffer
	code := Run(context.Background(), full, strings.NewReader(""), &out, &errb)
	r := result{code, out.String(), errb.String()}
	for _, s := range d.secrets {
		if s != "" && (strings.Contains(r.stdout, s) || strings.Contains(r.stderr, s)) {
			d.t.Fatalf("corral %s printed a secret\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.stdout, r.stderr)
		}
	}
	return r
}

func (d *doctorCluster) doctor(token string, args ...string) result {
	d.t.Helper()
	return d.corral(token, true, append([]string{"doctor"}, args...)...)
}

func wantOutput(t *testing.T, r result, code int, wants ...string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	for _, w := range wants {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("stdout lacks %q:\n%s", w, r.stdout)
		}
	}
}

const doctorManifest = `apps:
  - name: notes
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    cores: 1
    memory: 256
    rootfs:
      size: 2G
    features:
      nesting: true
    volumes:
      - name: data
        size: 1G
        mount: /srv/data
`

func TestDoctor_operatorToken(t *testing.T) {
	t.Parallel()
	d := newDoctorCluster(t)
	m := writeManifest(t, doctorManifest)
	op := d.srv.Credentials().OperatorToken
	wantOutput(t, d.doctor(op, "-f", m), 0,
		"as corral@pve!corral", "Proxmox VE 9.1", "template local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst: present",
		"storage local-lvm (lvmthin; images,rootdir)", "this manifest allocates 3 GiB", "app notes: node pve, next free vmid 100, to create",
		"OK: this manifest can be applied with this token.")

	r := d.doctor(op, "-f", m, "-o", "json")
	var rep doctor.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("-o json: %v\n%s", err, r.stdout)
	}
	if r.code != 0 || !rep.Applyable || len(rep.Findings) != 0 || rep.Facts.NextVMID != 100 || rep.TokenID != "corral@pve!corral" {
		t.Errorf("-o json: exit %d, report %+v", r.code, rep)
	}
}

func TestDoctor_roleLacksPrivileges(t *testing.T) {
	t.Parallel()
	d := newDoctorCluster(t)
	m := writeManifest(t, doctorManifest)
	tok := d.operatorWithout("Narrow", "narrow@pve", "VM.Backup", "Datastore.AllocateSpace")

	wantOutput(t, d.doctor(tok, "-f", m), 1,
		"ERROR   /vms, VM.Backup: token narrow@pve!ci lacks VM.Backup on /vms: the role Narrow it holds there (on /) does not include VM.Backup",
		"needed to: back up and restore the ct of app notes",
		"why: vzdump checks VM.Backup per guest inside its task",
		"fix: pveum role modify Narrow --privs VM.Backup --append 1",
		"ERROR   /storage/local-lvm, Datastore.AllocateSpace: token narrow@pve!ci lacks Datastore.AllocateSpace on /storage/local-lvm",
		"needed to: allocate the rootfs of the ct of app notes on local-lvm; allocate volume data of app notes on local-lvm",
		"fix: pveum role modify Narrow --privs Datastore.AllocateSpace --append 1",
		"NOT READY: ")

	r := d.doctor(tok, "-f", m, "-o", "json")
	var rep doctor.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("-o json: %v\n%s", err, r.stdout)
	}
	var got []string
	for _, f := range rep.Findings {
		got = append(got, f.Path+" "+f.Privilege)
		if f.Operation == "" || f.Why == "" {
			t.Errorf("finding without operation or why: %+v", f)
		}
	}
	want := []string{"/vms VM.Backup", "/storage/local-lvm Datastore.AllocateSpace", "/storage/local Datastore.AllocateSpace"}
	if !slices.Equal(got, want) || r.code != 1 || rep.Applyable {
		t.Errorf("-o json: exit %d, findings %q, want %q", r.code, got, want)
	}
}

func TestDoctor_privsepTokenOnlyACL(t *testing.T) {
	t.Parallel()
	d := newDoctorCluster(t)
	m := writeManifest(t, doctorManifest)
	tok := d.token("tonly@pve", "ci")
	id, _, _ := strings.Cut(tok, "=")
	d.acl("/", model.OperatorRole, "", id, true)

	wantOutput(t, d.doctor(tok, "-f", m), 1,
		"token tonly@pve!ci holds no privilege on any path corral needs",
		"it holds only what both its own ACL and user tonly@pve hold: a role granted to the token alone gives it nothing",
		"fix: pveum acl modify / --users tonly@pve --roles CorralOperator\n",
		"All fixes, once each:\n  pveum acl modify / --users tonly@pve --roles CorralOperator\n  pveum acl modify /vms --users tonly@pve --tokens 'tonly@pve!ci' --roles CorralOperator --propagate 1\n")

	// The printed fix works.
	d.acl("/", model.OperatorRole, "tonly@pve", "", true)
	wantOutput(t, d.doctor(tok, "-f", m), 0, "OK: ")
}

// TestDoctor_userLacksSDNUse is the intersection case: the token's
// own ACL has every privilege, but its user's role lacks SDN.Use.
func TestDoctor_userLacksSDNUse(t *testing.T) {
	t.Parallel()
	d := newDoctorCluster(t)
	m := writeManifest(t, doctorManifest)
	d.role("NoSDN", slices.DeleteFunc(slices.Clone(model.OperatorPrivileges), func(p string) bool { return p == "SDN.Use" }))
	tok := d.token("nosdn@pve", "ci")
	id, _, _ := strings.Cut(tok, "=")
	d.acl("/", "NoSDN", "nosdn@pve", "", true)
	d.acl("/", model.OperatorRole, "", id, true)

	wantOutput(t, d.doctor(tok, "-f", m), 1,
		"ERROR   /sdn/zones/localnetwork/vmbr0, SDN.Use: token nosdn@pve!ci is privilege-separated: it holds only what both its own ACL and user nosdn@pve hold. "+
			"Its ACL grants SDN.Use on /sdn/zones/localnetwork/vmbr0 (role CorralOperator on /), but user nosdn@pve lacks it",
		"needed to: attach net0 of the ct of app notes to bridge vmbr0",
		"fix: pveum acl modify / --users nosdn@pve --roles CorralOperator\n")
}

func TestDoctor_keyctlNeedsRoot(t *testing.T) {
	t.Parallel()
	d := newDoctorCluster(t)
	m := writeManifest(t, `apps:
  - name: web
    vmid: 120
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    provision:
      - compose:
          content: |
            services:
              web: {image: nginx}
`)
	r := d.doctor(d.srv.Credentials().OperatorToken, "-f", m)
	wantOutput(t, r, 1,
		"ROOT    app web needs feature flags other than nesting (keyctl=1), which only a root@pam session can set",
		"apply creates CT 120 and stops before provisioning; then run once on node pve as root, and apply again:",
		"fix: pct set 120 -features nesting=1,keyctl=1\n")
	if strings.Contains(r.stdout, "ERROR") {
		t.Errorf("the operator token lacks nothing else:\n%s", r.stdout)
	}
}

func TestDoctor_unknownCertificate(t *testing.T) {
	t.Parallel()
	d := newDoctorCluster(t)
	m := writeManifest(t, doctorManifest)
	fp := d.srv.Fingerprint()
	r := d.corral(d.srv.Credentials().OperatorToken, false, "doctor", "-f", m)
	wantOutput(t, r, 1,
		"the server's TLS certificate is not trusted; its SHA-256 fingerprint is "+fp,
		"fix: export PROXMOX_VE_FINGERPRINT="+fp+"\n",
		"fix: corral doctor --fingerprint "+fp+"\n")

	r = d.corral(d.srv.Credentials().OperatorToken, false, "doctor", "-f", m, "-o", "json")
	var rep doctor.Report
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || r.code != 1 || len(rep.Findings) != 1 || rep.Findings[0].Kind != "tls" {
		t.Errorf("-o json: exit %d, err %v, report %+v", r.code, err, rep)
	}
}

// TestDoctor_printedSetup applies the printed setup through the access
// API, checks that doctor accepts the token and apply works with it and
// nothing else, and that taking any single privilege from the role makes
// doctor name it.
func TestDoctor_printedSetup(t *testing.T) {
	t.Parallel()
	d := newDoctorCluster(t)
	m := writeManifest(t, doctorManifest)
	r := d.corral("", false, "doctor", "-f", m, "--print-setup", "-o", "json", "--user", "ops@pve", "--token-name", "ci", "--role", "CorralCI")
	var s doctor.SetupPlan
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil || r.code != 0 {
		t.Fatalf("--print-setup -o json: exit %d, %v\n%s%s", r.code, err, r.stdout, r.stderr)
	}
	text := d.corral("", false, "doctor", "-f", m, "--print-setup", "--user", "ops@pve", "--token-name", "ci", "--role", "CorralCI")
	wantOutput(t, text, 0, "pveum user token add ops@pve ci --privsep 1", "pveum acl modify /vms --tokens 'ops@pve!ci' --roles CorralCI --propagate 1")

	d.role(s.Role, s.Privileges)
	tok := d.token(s.User, "ci")
	id, _, _ := strings.Cut(tok, "=")
	if id != s.Token {
		t.Fatalf("token %s, setup says %s", id, s.Token)
	}
	for _, a := range s.ACLs {
		d.acl(a.Path, s.Role, s.User, s.Token, a.Propagate)
	}
	wantOutput(t, d.doctor(tok, "-f", m), 0, "OK: ")
	apply := d.corral(tok, true, "apply", "-f", m, "--auto-approve")
	if apply.code != 0 {
		t.Fatalf("apply with the setup's token: exit %d\n%s%s", apply.code, apply.stdout, apply.stderr)
	}
	wantOutput(t, d.doctor(tok, "-f", m), 0, "app notes: node pve, ct 101, exists", "OK: ")
	d.lifecycle(tok, 101)

	for _, drop := range s.Privileges {
		t.Run("without "+drop, func(t *testing.T) {
			d.setRole(s.Role, slices.DeleteFunc(slices.Clone(s.Privileges), func(p string) bool { return p == drop }))
			defer d.setRole(s.Role, s.Privileges)
			r := d.doctor(tok, "-f", m, "-o", "json")
			var rep doctor.Report
			if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
				t.Fatalf("-o json: %v\n%s", err, r.stdout)
			}
			named := slices.ContainsFunc(rep.Findings, func(f doctor.Finding) bool { return f.Privilege == drop && f.Operation != "" })
			want := 1
			if drop == "Datastore.AllocateTemplate" || drop == "VM.Migrate" {
				// Needed for the next template change, not for this
				// manifest on this cluster: a warning.
				want = 0
			}
			if r.code != want || !named {
				t.Errorf("exit %d; want %d and a finding naming %s:\n%s", r.code, want, drop, r.stdout)
			}
		})
	}
}

// lifecycle snapshots, rolls back, backs up and restores CT vmid with
// token only, through the API client (no corral verb does these yet).
func (d *doctorCluster) lifecycle(token string, vmid int) {
	d.t.Helper()
	ctx := context.Background()
	c := pvetest.Client(d.t, d.srv, token)
	wait := func(what string, upid string, err error) {
		d.t.Helper()
		if err == nil {
			_, err = c.WaitTask(ctx, upid, pve.WaitOptions{})
		}
		if err != nil {
			d.t.Fatalf("%s with the setup's token: %v", what, err)
		}
	}
	upid, err := c.CreateSnapshot(ctx, "pve", vmid, "before", "")
	wait("snapshot", upid, err)
	upid, err = c.RollbackSnapshot(ctx, "pve", vmid, "before", false)
	wait("rollback", upid, err)
	upid, err = c.DeleteSnapshot(ctx, "pve", vmid, "before", false)
	wait("delete snapshot", upid, err)
	upid, err = c.Backup(ctx, "pve", vmid, pve.BackupOptions{Storage: "local", Mode: "stop"})
	wait("backup", upid, err)
	backups, err := c.Backups(ctx, "pve", "local", vmid)
	if err != nil || len(backups) != 1 {
		d.t.Fatalf("list backups with the setup's token: %v, %d archives", err, len(backups))
	}
	if st, err := c.ContainerStatus(ctx, "pve", vmid); err == nil && st.Running() {
		upid, err := c.StopContainer(ctx, "pve", vmid)
		wait("stop", upid, err)
	}
	upid, err = c.RestoreContainer(ctx, "pve", vmid, backups[0].VolID, pve.RestoreOptions{Storage: "local-lvm", Force: true})
	wait("restore", upid, err)
}

func TestDoctor_badFlags(t *testing.T) {
	t.Parallel()
	d := newDoctorCluster(t)
	m := writeManifest(t, doctorManifest)
	r := d.doctor(d.srv.Credentials().OperatorToken, "-f", m, "-o", "yaml")
	if r.code != 1 || !strings.Contains(r.stderr, `--output "yaml": want text or json`) {
		t.Errorf("-o yaml: exit %d\n%s", r.code, r.stderr)
	}
}

func TestDoctor_rejectedToken(t *testing.T) {
	t.Parallel()
	d := newDoctorCluster(t)
	m := writeManifest(t, doctorManifest)
	wrong := "0f0e0d0c-0b0a-4908-8706-050403020100"
	d.secrets = append(d.secrets, wrong)
	wantOutput(t, d.doctor("corral@pve!corral="+wrong, "-f", m), 1,
		"ERROR   PVE does not accept the API token corral@pve!corral: check its id and secret")
}

// TestDoctor_namesVMMigrate: a token whose role lacks VM.Migrate can apply
// the manifest, but not move an app to another node (corral move, drain,
// a change of node:): doctor says so as a warning that names the
// privilege and the fix (issue 18).
func TestDoctor_namesVMMigrate(t *testing.T) {
	t.Parallel()
	d := newDoctorCluster(t)
	m := writeManifest(t, doctorManifest)
	tok := d.operatorWithout("NoMigrate", "nomig@pve", "VM.Migrate")
	wantOutput(t, d.doctor(tok, "-f", m), 0,
		"/vms, VM.Migrate: token nomig@pve!ci lacks VM.Migrate on /vms",
		"move the ct of app notes to another node (corral move, corral drain, a change of node:)",
		"fix: pveum role modify NoMigrate --privs VM.Migrate --append 1")
	wantOutput(t, d.doctor(tok, "-f", m, "--print-setup"), 0, "VM.Migrate")
}
