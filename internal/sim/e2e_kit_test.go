package sim

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/testenv"
)

// e2e is a tiny PVE client over real HTTPS for the end-to-end tests: it
// knows tokens, tickets with CSRF, PVE's envelope and tasks, and nothing
// of internal/pve (sim must not import it).
type e2e struct {
	t   *testing.T
	srv *Server
	dir string
	hc  *http.Client
}

// e2eCaller is who sends a request: an API token "user@realm!id=secret",
// or a ticket cookie with (or without) its CSRF token.
type e2eCaller struct {
	token  string
	ticket string
	csrf   string
}

func tokenCaller(tok string) e2eCaller { return e2eCaller{token: tok} }

// e2eResp is one raw API answer.
type e2eResp struct {
	status int
	reason string                     // the status line's reason phrase
	raw    map[string]json.RawMessage // top-level keys of the body
	data   json.RawMessage
	msg    string
	errs   map[string]string
}

func zeroScale() *float64 { z := 0.0; return &z }

// newE2E starts an emulator on 127.0.0.1:0 with TLS in a temp dir at time
// scale 0 (instant tasks).
func newE2E(t *testing.T) *e2e {
	t.Helper()
	return openE2E(t, Options{Dir: t.TempDir(), Listener: ListenTLS, TimeScale: zeroScale()})
}

// openE2E starts an emulator with opts and closes it at the end of the test.
func openE2E(t *testing.T, opts Options) *e2e {
	t.Helper()
	if opts.NodeMemory == 0 {
		// 32 GiB nodes on every machine (see pvetest.Start).
		opts.NodeMemory = 32 << 30
	}
	if opts.TLSCurves == nil {
		// P-256 alone, as pvetest's emulators: Go's default hybrid
		// X25519MLKEM768 is instrumented Go code under -race, a tenth of
		// this package's CPU in handshakes. TestTLS_defaultCurves keeps
		// the default.
		opts.TLSCurves = []tls.CurveID{tls.CurveP256}
	}
	srv, err := New(opts)
	if err != nil {
		t.Fatalf("sim.New: %v", err)
	}
	t.Cleanup(func() { srv.Close() })
	return &e2e{t: t, srv: srv, dir: opts.Dir, hc: srv.HTTPClient()}
}

func (k *e2e) root() e2eCaller { return tokenCaller(k.srv.Credentials().RootToken) }
func (k *e2e) op() e2eCaller   { return tokenCaller(k.srv.Credentials().OperatorToken) }

// newUserToken creates user userid with API token tokenid (privsep as
// given) and no ACL, and returns the token's full id and a caller with it.
func (k *e2e) newUserToken(userid, tokenid string, privsep bool) (string, e2eCaller) {
	k.t.Helper()
	root := k.root()
	k.ok(root, http.MethodPost, "/access/users", url.Values{"userid": {userid}}, nil)
	sep := "0"
	if privsep {
		sep = "1"
	}
	var tok struct {
		Value string `json:"value"`
		Full  string `json:"full-tokenid"`
	}
	k.ok(root, http.MethodPost, "/access/users/"+userid+"/token/"+tokenid, url.Values{"privsep": {sep}}, &tok)
	if tok.Full != userid+"!"+tokenid || tok.Value == "" {
		k.t.Fatalf("token create answered %+v", tok)
	}
	return tok.Full, tokenCaller(tok.Full + "=" + tok.Value)
}

// rootTicket logs root@pam in with its password (POST /access/ticket).
func (k *e2e) rootTicket() e2eCaller {
	k.t.Helper()
	r := k.do(e2eCaller{}, http.MethodPost, "/access/ticket", url.Values{"username": {"root@pam"}, "password": {k.srv.Credentials().RootPassword}})
	if r.status != 200 {
		k.t.Fatalf("login: %d %q", r.status, r.msg)
	}
	var out struct {
		Ticket string `json:"ticket"`
		CSRF   string `json:"CSRFPreventionToken"`
	}
	k.decode(r.data, &out)
	if out.Ticket == "" || out.CSRF == "" {
		k.t.Fatalf("login answer without ticket or CSRF token: %s", r.data)
	}
	return e2eCaller{ticket: out.Ticket, csrf: out.CSRF}
}

// request builds an API request: GET/DELETE parameters in the query,
// others form-encoded in the body.
func (k *e2e) request(who e2eCaller, method, path string, params url.Values) *http.Request {
	k.t.Helper()
	u := k.srv.URL() + "/api2/json" + path
	var body io.Reader
	if method == http.MethodGet || method == http.MethodDelete {
		if len(params) > 0 {
			u += "?" + params.Encode()
		}
	} else {
		body = strings.NewReader(params.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		k.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	switch {
	case who.token != "":
		req.Header.Set("Authorization", "PVEAPIToken="+who.token)
	case who.ticket != "":
		req.AddCookie(&http.Cookie{Name: "PVEAuthCookie", Value: who.ticket})
		if who.csrf != "" {
			req.Header.Set("CSRFPreventionToken", who.csrf)
		}
	}
	return req
}

// do sends one request and decodes PVE's envelope.
func (k *e2e) do(who e2eCaller, method, path string, params url.Values) e2eResp {
	k.t.Helper()
	return k.send(k.request(who, method, path, params))
}

func (k *e2e) send(req *http.Request) e2eResp {
	k.t.Helper()
	resp, err := k.hc.Do(req)
	if err != nil {
		k.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	out := e2eResp{status: resp.StatusCode, reason: strings.TrimSpace(strings.TrimPrefix(resp.Status, resp.Status[:3]))}
	if err := json.Unmarshal(raw, &out.raw); err != nil {
		k.t.Fatalf("%s %s: %d body %q is not a JSON object: %v", req.Method, req.URL.Path, resp.StatusCode, raw, err)
	}
	out.data = out.raw["data"]
	if m, ok := out.raw["message"]; ok {
		json.Unmarshal(m, &out.msg)
	}
	if e, ok := out.raw["errors"]; ok {
		json.Unmarshal(e, &out.errs)
	}
	return out
}

func (k *e2e) decode(raw json.RawMessage, out any) {
	k.t.Helper()
	if err := json.Unmarshal(raw, out); err != nil {
		k.t.Fatalf("decode %s: %v", raw, err)
	}
}

// ok sends a request that must answer 200 and decodes data into out.
func (k *e2e) ok(who e2eCaller, method, path string, params url.Values, out any) {
	k.t.Helper()
	r := k.do(who, method, path, params)
	if r.status != http.StatusOK {
		k.t.Fatalf("%s %s %v: %d %q %v", method, path, params, r.status, r.msg, r.errs)
	}
	if out != nil {
		k.decode(r.data, out)
	}
}

// e2eTask is a finished task.
type e2eTask struct {
	UPID       string `json:"upid"`
	Status     string `json:"status"`
	ExitStatus string `json:"exitstatus"`
	Type       string `json:"type"`
	ID         string `json:"id"`
	log        []string
}

// has reports whether the task log holds line.
func (t e2eTask) has(line string) bool { return slices.Contains(t.log, line) }

// upid sends a request that must answer with a UPID.
func (k *e2e) upid(who e2eCaller, method, path string, params url.Values) string {
	k.t.Helper()
	var upid string
	k.ok(who, method, path, params, &upid)
	if !strings.HasPrefix(upid, "UPID:pve:") {
		k.t.Fatalf("%s %s returned %q, not a UPID", method, path, upid)
	}
	return upid
}

// wait polls a task until it stops and reads its log.
func (k *e2e) wait(who e2eCaller, upid string) e2eTask {
	k.t.Helper()
	var st e2eTask
	testenv.WaitFor(k.t, "task "+upid+" to stop", func() bool {
		st = e2eTask{}
		k.ok(who, http.MethodGet, "/nodes/pve/tasks/"+url.PathEscape(upid)+"/status", nil, &st)
		return st.Status == "stopped"
	})
	var lines []struct {
		T string `json:"t"`
	}
	k.ok(who, http.MethodGet, "/nodes/pve/tasks/"+url.PathEscape(upid)+"/log", url.Values{"limit": {"1000"}}, &lines)
	for _, l := range lines {
		st.log = append(st.log, l.T)
	}
	return st
}

// task runs an async call to its end and returns the finished task.
func (k *e2e) task(who e2eCaller, method, path string, params url.Values) e2eTask {
	k.t.Helper()
	return k.wait(who, k.upid(who, method, path, params))
}

// mustOK runs an async call that must end "OK" (or with warnings).
func (k *e2e) mustOK(who e2eCaller, method, path string, params url.Values) e2eTask {
	k.t.Helper()
	st := k.task(who, method, path, params)
	if st.ExitStatus != "OK" && !strings.HasPrefix(st.ExitStatus, "WARNINGS:") {
		k.t.Fatalf("%s %s %v: task ended %q\n%s", method, path, params, st.ExitStatus, strings.Join(st.log, "\n"))
	}
	return st
}

// create makes a stopped unprivileged CT with a 1 GiB rootfs on local-lvm.
func (k *e2e) create(who e2eCaller, vmid string, extra url.Values) e2eTask {
	k.t.Helper()
	p := url.Values{"vmid": {vmid}, "ostemplate": {"local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst"},
		"rootfs": {"local-lvm:1"}, "unprivileged": {"1"}, "hostname": {"ct" + vmid}}
	for key, v := range extra {
		p[key] = v
	}
	return k.mustOK(who, http.MethodPost, "/nodes/pve/lxc", p)
}

// config reads a CT's config as strings.
func (k *e2e) config(vmid string, current bool) map[string]any {
	k.t.Helper()
	p := url.Values{}
	if current {
		p.Set("current", "1")
	}
	var conf map[string]any
	k.ok(k.root(), http.MethodGet, "/nodes/pve/lxc/"+vmid+"/config", p, &conf)
	return conf
}

// envFile parses Dir/env's "export K='v'" lines.
func envFile(t *testing.T, text string) map[string]string {
	t.Helper()
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "export ")
		if !ok {
			continue
		}
		k, v, _ := strings.Cut(line, "=")
		if strings.HasPrefix(v, "'") {
			v = strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(v, "'"), "'"), `'\''`, "'")
		}
		out[k] = v
	}
	return out
}

func jsonUnmarshal(raw []byte, v any) error { return json.Unmarshal(raw, v) }

// sub is the kit for a subtest, so that failures stop the subtest only.
func (k *e2e) sub(t *testing.T) *e2e {
	c := *k
	c.t = t
	return &c
}
