package doctor_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/doctor"
	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/sim"
	"github.com/corralhq/corral/internal/sim/model"
)

// emulator is the kit's in-process emulator (its Client speaks for the
// operator token) plus a client for root.
type emulator struct {
	*pvetest.Emulator
	root *pve.Client
}

func newEmulator(t *testing.T) *emulator {
	t.Helper()
	e := &emulator{Emulator: pvetest.Start(t, pvetest.InProcess())}
	e.root = e.client(t, e.Credentials().RootToken)
	return e
}

func (e *emulator) client(t *testing.T, token string) *pve.Client {
	t.Helper()
	return pvetest.Client(t, e.Server, token)
}

// narrow creates a privsep token whose user and token both hold a role
// of the operator privileges without drop, on /.
func (e *emulator) narrow(t *testing.T, drop ...string) *pve.Client {
	t.Helper()
	ctx := context.Background()
	privs := slices.DeleteFunc(slices.Clone(model.OperatorPrivileges), func(p string) bool { return slices.Contains(drop, p) })
	var out struct {
		ID     string `json:"full-tokenid"`
		Secret string `json:"value"`
	}
	for _, step := range []func() error{
		func() error {
			return e.root.Post(ctx, "/access/roles", url.Values{"roleid": {"Narrow"}, "privs": {strings.Join(privs, ",")}}, nil)
		},
		func() error { return e.root.Post(ctx, "/access/users", url.Values{"userid": {"narrow@pve"}}, nil) },
		func() error {
			return e.root.Post(ctx, "/access/users/narrow@pve/token/ci", url.Values{"privsep": {"1"}}, &out)
		},
		func() error {
			return e.root.Put(ctx, "/access/acl", url.Values{"path": {"/"}, "roles": {"Narrow"}, "users": {"narrow@pve"}, "tokens": {"narrow@pve!ci"}}, nil)
		},
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	return e.client(t, out.ID+"="+out.Secret)
}

func parse(t *testing.T, text string) *manifest.File {
	t.Helper()
	f, err := manifest.Parse("corral.yaml", []byte(text), manifest.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

const web = `apps:
  - name: web
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    rootfs: {size: 4G}
`

func TestCheck_facts(t *testing.T) {
	e := newEmulator(t)
	r, err := doctor.Check(context.Background(), e.Client, parse(t, web), doctor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Applyable || len(r.Findings) != 0 {
		t.Fatalf("operator token: %+v", r.Findings)
	}
	if got, want := r.Facts.NextVMID, 100; got != want {
		t.Errorf("NextVMID=%d, want %d", got, want)
	}
	if len(r.Facts.Nodes) != 1 || r.Facts.Nodes[0].Name != "pve" || !slices.Contains(r.Facts.Nodes[0].Templates, model.DefaultTemplate) {
		t.Fatalf("nodes: %+v", r.Facts.Nodes)
	}
	var lvm *doctor.StorageFacts
	for i, s := range r.Facts.Nodes[0].Storages {
		if s.ID == "local-lvm" {
			lvm = &r.Facts.Nodes[0].Storages[i]
		}
	}
	if lvm == nil || lvm.Need != 4<<30 || lvm.Avail <= 0 || lvm.Type != "lvmthin" {
		t.Errorf("local-lvm facts: %+v", lvm)
	}
}

func TestCheck_findings(t *testing.T) {
	tests := []struct {
		name      string
		manifest  string
		applyable bool
		want      []string // kind: message fragment
	}{
		{
			name:      "template not on the node: the operator role may download it",
			manifest:  strings.Replace(web, "debian-12-standard_12.12-1_amd64.tar.zst", "alpine-3.20-default_20240908_amd64.tar.xz", 1),
			applyable: true,
			want: []string{
				"template: template local:vztmpl/alpine-3.20-default_20240908_amd64.tar.xz is not on node pve",
			},
		},
		{
			name:     "storage that does not exist",
			manifest: strings.Replace(web, "rootfs: {size: 4G}", "rootfs: {size: 4G, storage: fast}", 1),
			want:     []string{"storage: app web: storage fast (for the root file system) does not exist on node pve"},
		},
		{
			name:     "backups on a storage without backup content",
			manifest: web + "    backup: {storage: local-lvm}\n",
			want:     []string{"storage: app web: storage local-lvm on node pve cannot hold backups"},
		},
		{
			name:      "more than the thin pool holds is a warning",
			manifest:  strings.Replace(web, "4G", "500G", 1),
			applyable: true,
			want:      []string{"space: storage local-lvm on node pve has 400 GiB free, and this manifest would allocate 500 GiB (thin provisioning"},
		},
		{
			name:     "docker needs keyctl from root",
			manifest: web + "    provision:\n      - compose:\n          content: 'services: {web: {image: nginx}}'\n",
			want:     []string{"root-only: app web needs feature flags other than nesting (keyctl=1)"},
		},
		{
			name:     "unknown node",
			manifest: web + "    node: pve7\n",
			want:     []string{`node: app web: node "pve7" does not exist (nodes: pve)`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEmulator(t)
			r, err := doctor.Check(context.Background(), e.Client, parse(t, tt.manifest), doctor.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range r.Findings {
				got = append(got, f.Kind+": "+f.Message)
			}
			for _, w := range tt.want {
				if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, w) }) {
					t.Errorf("no finding starts with %q; got:\n%s", w, strings.Join(got, "\n"))
				}
			}
			if r.Applyable != tt.applyable {
				t.Errorf("Applyable=%v, want %v", r.Applyable, tt.applyable)
			}
		})
	}
}

func TestPreflight(t *testing.T) {
	e := newEmulator(t)
	ctx := context.Background()
	if err := doctor.Preflight(ctx, e.Client, parse(t, web)); err != nil {
		t.Errorf("operator token: %v", err)
	}
	// Root-only needs do not stop apply before it starts: apply creates
	// the container and stops before provisioning, naming root's command.
	keyctl := web + "    provision:\n      - compose:\n          content: 'services: {web: {image: nginx}}'\n"
	if err := doctor.Preflight(ctx, e.Client, parse(t, keyctl)); err != nil {
		t.Errorf("keyctl manifest: %v", err)
	}
	err := doctor.Preflight(ctx, e.narrow(t, "VM.Allocate"), parse(t, web))
	var blocked *doctor.BlockedError
	if !errors.As(err, &blocked) {
		t.Fatalf("narrow token: %v, want *BlockedError", err)
	}
	for _, want := range []string{
		"preflight: apply would fail with this token; nothing was changed",
		"VM.Allocate on /vms (needed to create and destroy the ct of app web): token narrow@pve!ci lacks VM.Allocate",
		"fix: pveum role modify Narrow --privs VM.Allocate --append 1",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestEvaluate_vmidOnlyGrant(t *testing.T) {
	reqs := []doctor.Requirement{{Path: "/vms/105", Priv: "VM.Allocate", Operation: "create web", Why: "w", App: "web"}}
	acc := doctor.Access{TokenID: "a@pve!t", Token: doctor.Perms{"/vms/105": {"VM.Allocate": 1}, "/vms": {}}}
	fs := doctor.Evaluate(reqs, acc)
	if len(fs) != 1 || fs[0].Severity != doctor.SevWarning || !strings.Contains(fs[0].Message, "the grant disappears when corral destroys the container") {
		t.Fatalf("findings: %+v", fs)
	}
	acc.Token["/vms"] = map[string]int{"VM.Allocate": 1}
	if fs := doctor.Evaluate(reqs, acc); len(fs) != 0 {
		t.Errorf("granted on /vms with propagation: %+v", fs)
	}
}

func TestCheck_pve8(t *testing.T) {
	c := pvetest.Start(t, pvetest.InProcess(), func(o *sim.Options) { o.Version = "8.4" }).Client
	r, err := doctor.Check(context.Background(), c, parse(t, web), doctor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Applyable || !strings.HasPrefix(r.Facts.Version, "8.4") {
		t.Errorf("PVE 8.4: applyable %v, version %q, findings %+v", r.Applyable, r.Facts.Version, r.Findings)
	}
	if !slices.ContainsFunc(r.Findings, func(f doctor.Finding) bool {
		return f.Kind == "version" && f.Severity == doctor.SevInfo && strings.Contains(f.Message, "created without 'unprivileged' is privileged")
	}) {
		t.Errorf("no PVE 8 note: %+v", r.Findings)
	}
}

// failPermissions answers 400 to the token's own GET /access/permissions
// on one path, and passes everything else to next.
type failPermissions struct {
	next http.RoundTripper
	path string
}

func (f failPermissions) RoundTrip(r *http.Request) (*http.Response, error) {
	q := r.URL.Query()
	if strings.HasSuffix(r.URL.Path, "/access/permissions") && q.Get("path") == f.path && q.Get("userid") == "" {
		return &http.Response{StatusCode: http.StatusBadRequest, Status: "400 broken", Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(`{"data":null,"message":"broken\n"}`)), Request: r}, nil
	}
	return f.next.RoundTrip(r)
}

// Privileges that could not be read are said to be unread, not only
// reported missing.
func TestCheck_unreadPrivileges(t *testing.T) {
	e := newEmulator(t)
	c := pvetest.Client(t, e.Server, e.Server.Credentials().OperatorToken,
		pvetest.Transport(failPermissions{next: e.Server.HTTPClient().Transport, path: "/storage/local-lvm"}))
	r, err := doctor.Check(context.Background(), c, parse(t, web), doctor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(r.Findings, func(f doctor.Finding) bool {
		return f.Kind == "connection" && f.Severity == doctor.SevWarning && f.Path == "/storage/local-lvm" && strings.Contains(f.Message, "could not read the token's privileges")
	}) {
		t.Errorf("no unread-privileges finding: %+v", r.Findings)
	}
}

// withApps creates n corral-managed CTs app0…app<n-1> (vmid 200+i) and
// returns a manifest naming all of them.
func (e *emulator) withApps(t *testing.T, n int) *manifest.File {
	t.Helper()
	c := e.Server.Cluster()
	root := model.Auth{UserID: "root@pam"}
	var m strings.Builder
	m.WriteString("apps:\n")
	for i := range n {
		name := "app" + strconv.Itoa(i)
		upid, err := c.CreateCT(root, "pve", map[string]string{
			"vmid": strconv.Itoa(200 + i), "ostemplate": model.DefaultTemplate, "rootfs": "local-lvm:4",
			"hostname": name, "tags": "corral;corral-app-" + name, "unprivileged": "1",
		})
		if err == nil {
			_, err = c.WaitTask(context.Background(), "pve", upid)
		}
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&m, "  - name: %s\n    template: %s\n    rootfs: {size: 4G}\n", name, model.DefaultTemplate)
	}
	return parse(t, m.String())
}

// checkRequests runs Check with the client of token and returns the
// requests it made and its findings.
func (e *emulator) checkRequests(t *testing.T, c *pve.Client, f *manifest.File) (int, []string) {
	t.Helper()
	e.Server.ResetRequests()
	r, err := doctor.Check(context.Background(), c, f, doctor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, total := e.Server.Requests()
	var findings []string
	for _, fd := range r.Findings {
		findings = append(findings, fd.Kind+": "+fd.Message)
	}
	return total, findings
}

// TestCheck_requestsDoNotGrowWithContainers: doctor (and so apply's
// preflight) makes as many requests for a manifest of 12 existing apps as
// for one, whether or not the token may read the ACL (a read per container
// would show as 11 more; 50 apps took 4 s more of CPU under -race).
func TestCheck_requestsDoNotGrowWithContainers(t *testing.T) {
	for _, tc := range []struct {
		name string
		drop []string
	}{
		{name: "operator token"},
		{name: "token that cannot read its user's privileges", drop: []string{"Sys.Audit"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			counts := map[int]int{}
			for _, n := range []int{1, 12} {
				e := newEmulator(t)
				f := e.withApps(t, n)
				tok := e.Client
				if tc.drop != nil {
					tok = e.narrow(t, tc.drop...)
				}
				got, findings := e.checkRequests(t, tok, f)
				for _, fd := range findings {
					if strings.HasPrefix(fd, "privilege:") && strings.Contains(fd, "/vms") {
						t.Errorf("%d apps: %s", n, fd)
					}
				}
				counts[n] = got
			}
			if counts[1] != counts[12] {
				t.Errorf("doctor made %d requests for 1 existing app and %d for 12", counts[1], counts[12])
			}
		})
	}
}

// TestCheck_narrowGrantOnOneContainer: an ACL entry that leaves the
// token only VM.Audit on one container is found, although the
// per-container privileges come from one read for all of them.
func TestCheck_narrowGrantOnOneContainer(t *testing.T) {
	e := newEmulator(t)
	f := e.withApps(t, 5)
	ctx := context.Background()
	if err := e.root.Put(ctx, "/access/acl", url.Values{"path": {"/vms/203"}, "roles": {"PVEAuditor"}, "tokens": {"corral@pve!corral"}}, nil); err != nil {
		t.Fatal(err)
	}
	_, findings := e.checkRequests(t, e.Client, f)
	var on203 []string
	for _, fd := range findings {
		switch {
		case strings.HasPrefix(fd, "privilege:") && strings.Contains(fd, "/vms/203"):
			on203 = append(on203, fd)
		case strings.HasPrefix(fd, "privilege:"):
			t.Errorf("unexpected: %s", fd)
		}
	}
	if !slices.ContainsFunc(on203, func(fd string) bool { return strings.Contains(fd, "lacks VM.Config.Memory on /vms/203") }) {
		t.Errorf("no finding that VM.Config.Memory is missing on /vms/203; got:\n%s", strings.Join(findings, "\n"))
	}
}

// TestCheck_allocateTemplate: corral's role includes
// Datastore.AllocateTemplate because apply downloads a template the node
// lacks. A token without it fails doctor when the manifest's template is
// missing, and is warned (still able to apply) when it is there.
func TestCheck_allocateTemplate(t *testing.T) {
	e := newEmulator(t)
	tok := e.narrow(t, "Datastore.AllocateTemplate")
	for _, tc := range []struct {
		name      string
		manifest  string
		applyable bool
		severity  doctor.Severity
	}{
		{"template on the node", web, true, doctor.SevWarning},
		{"template to download", strings.Replace(web, "debian-12-standard_12.12-1_amd64.tar.zst", "debian-13-standard_13.1-2_amd64.tar.zst", 1), false, doctor.SevError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := doctor.Check(context.Background(), tok, parse(t, tc.manifest), doctor.Options{})
			if err != nil {
				t.Fatal(err)
			}
			found := slices.ContainsFunc(r.Findings, func(f doctor.Finding) bool {
				return f.Privilege == "Datastore.AllocateTemplate" && f.Path == "/storage/local" && f.Severity == tc.severity
			})
			if !found || r.Applyable != tc.applyable {
				t.Errorf("applyable %v, want %v; want a %s about Datastore.AllocateTemplate in %+v", r.Applyable, tc.applyable, tc.severity, r.Findings)
			}
		})
	}
}

// TestCheck_listedPathsAreNotReadAlone: a path that GET
// /access/permissions without path lists (here "/", "/access", "/vms",
// "/storage", "/nodes" for the operator token and its user) takes its
// privileges from that one read, so the preflight reads alone only what
// the list leaves out. Before, each path was read alone: 18 reads for one
// existing app (token and user); now 12. The operator token must still
// hold every privilege.
func TestCheck_listedPathsAreNotReadAlone(t *testing.T) {
	e := newEmulator(t)
	f := e.withApps(t, 1)
	_, findings := e.checkRequests(t, e.Client, f)
	stats, _ := e.Server.Requests()
	reads := 0
	for _, s := range stats {
		if s.Endpoint == "GET /access/permissions" {
			reads = s.Count
		}
	}
	if reads == 0 || reads > 12 {
		t.Errorf("doctor read /access/permissions %d times for one app, want 1..12", reads)
	}
	for _, fd := range findings {
		if strings.HasPrefix(fd, "privilege:") {
			t.Errorf("operator token: %s", fd)
		}
	}
}

// requestsOf is how many requests the emulator answered per endpoint
// since its counters were reset.
func (e *emulator) requestsOf() map[string]int {
	stats, _ := e.Server.Requests()
	out := map[string]int{}
	for _, s := range stats {
		out[s.Endpoint] = s.Count
	}
	return out
}

// TestPreflight_readsNoExplanationWhenNothingIsMissing: the user's
// privileges and the ACL only explain a privilege the token lacks, so a
// preflight whose token holds everything reads neither (issue 30: they
// were 7 of a one-app apply's 80 requests), while doctor still does; a
// token that lacks one still gets the explanation (TestPreflight).
func TestPreflight_readsNoExplanationWhenNothingIsMissing(t *testing.T) {
	e := newEmulator(t)
	f := e.withApps(t, 1)
	ctx := context.Background()
	e.Server.ResetRequests()
	if _, err := doctor.Check(ctx, e.Client, f, doctor.Options{}); err != nil {
		t.Fatal(err)
	}
	full := e.requestsOf()
	e.Server.ResetRequests()
	if err := doctor.Preflight(ctx, e.Client, f); err != nil {
		t.Fatal(err)
	}
	lean := e.requestsOf()
	t.Logf("doctor: %v\npreflight: %v", full, lean)
	for _, ep := range []string{"GET /access/acl", "GET /access/roles"} {
		if full[ep] == 0 {
			t.Errorf("doctor did not read %s: the test no longer shows the difference", ep)
		}
		if lean[ep] != 0 {
			t.Errorf("preflight read %s %d times with a token that holds everything", ep, lean[ep])
		}
	}
	if p := "GET /access/permissions"; lean[p] >= full[p] || lean[p] > 6 {
		t.Errorf("preflight read %s %d times (doctor %d): want only the token's, at most 6", p, lean[p], full[p])
	}
}
