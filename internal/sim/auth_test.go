package sim

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestAuth covers how callers identify themselves: the API token header,
// a ticket from POST /access/ticket, and the CSRF token writes need with it.
func TestAuth(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	op := k.srv.Credentials().OperatorToken
	id, secret, _ := strings.Cut(op, "=")
	header := func(h string) e2eResp {
		req := k.request(e2eCaller{}, http.MethodGet, "/nodes/pve/lxc", nil)
		if h != "" {
			req.Header.Set("Authorization", h)
		}
		return k.send(req)
	}
	for _, c := range []struct {
		name, header string
		status       int
		msg          string
	}{
		{"token", "PVEAPIToken=" + op, 200, ""},
		{"token with space", "PVEAPIToken " + op, 200, ""},
		{"wrong secret", "PVEAPIToken=" + id + "=" + strings.Repeat("0", len(secret)), 401, "authentication failure\n"},
		{"unknown token", "PVEAPIToken=corral@pve!nope=" + secret, 401, "authentication failure\n"},
		{"unknown user", "PVEAPIToken=ghost@pve!corral=" + secret, 401, "authentication failure\n"},
		{"no secret", "PVEAPIToken=" + id, 401, "authentication failure\n"},
		{"bearer", "Bearer " + secret, 401, "authentication failure\n"},
		{"nothing", "", 401, "No ticket\n"},
	} {
		r := header(c.header)
		if r.status != c.status || r.msg != c.msg {
			t.Errorf("%s: %d %q, want %d %q", c.name, r.status, r.msg, c.status, c.msg)
		}
		if c.status == 401 && r.reason != strings.TrimSuffix(c.msg, "\n") {
			t.Errorf("%s: reason phrase %q", c.name, r.reason)
		}
	}

	// Ticket login.
	bad := k.do(e2eCaller{}, http.MethodPost, "/access/ticket", url.Values{"username": {"root@pam"}, "password": {"wrong"}})
	if bad.status != 401 || bad.msg != "authentication failure\n" {
		t.Errorf("wrong password: %d %q, want 401", bad.status, bad.msg)
	}
	split := k.do(e2eCaller{}, http.MethodPost, "/access/ticket", url.Values{"username": {"root"}, "realm": {"pam"}, "password": {k.srv.Credentials().RootPassword}})
	if split.status != 200 {
		t.Errorf("username+realm login: %d %q", split.status, split.msg)
	}
	tk := k.rootTicket()
	if !strings.HasPrefix(tk.ticket, "PVE:root@pam:") {
		t.Errorf("ticket %q does not have PVE's PVE:<user>:<time>::<sig> form", tk.ticket)
	}
	// Reads need no CSRF token; writes do, and only the right one.
	k.ok(e2eCaller{ticket: tk.ticket}, http.MethodGet, "/nodes/pve/lxc", nil, nil)
	k.create(tk, "110", nil)
	path := "/nodes/pve/lxc/110/config"
	if r := k.do(e2eCaller{ticket: tk.ticket}, http.MethodPut, path, url.Values{"cores": {"2"}}); r.status != 401 || r.msg != "Permission denied - invalid csrf token\n" {
		t.Errorf("write without CSRF: %d %q", r.status, r.msg)
	}
	if r := k.do(e2eCaller{ticket: tk.ticket, csrf: "deadbeef:" + strings.Repeat("A", 27)}, http.MethodPut, path, url.Values{"cores": {"2"}}); r.status != 401 {
		t.Errorf("write with a forged CSRF token: %d %q", r.status, r.msg)
	}
	k.ok(tk, http.MethodPut, path, url.Values{"cores": {"2"}}, nil)
	if got := k.config("110", false)["cores"]; got != float64(2) {
		t.Errorf("cores after the ticket write = %v", got)
	}
	// A tampered ticket is refused.
	if r := k.do(e2eCaller{ticket: tk.ticket + "x"}, http.MethodGet, "/nodes/pve/lxc", nil); r.status != 401 {
		t.Errorf("tampered ticket: %d %q", r.status, r.msg)
	}
	// The token header wins over a cookie, so a token never needs CSRF.
	req := k.request(tokenCaller(op), http.MethodPut, path, url.Values{"cores": {"3"}})
	req.AddCookie(&http.Cookie{Name: "PVEAuthCookie", Value: "garbage"})
	if r := k.send(req); r.status != 200 {
		t.Errorf("token write with a stray cookie: %d %q", r.status, r.msg)
	}
	// The admin API is root@pam's only.
	areq := k.request(tokenCaller(op), http.MethodGet, "/x", nil)
	areq.URL.Path = "/_corral/requests"
	if r := k.send(areq); r.status != 403 {
		t.Errorf("operator on /_corral/requests: %d %q", r.status, r.msg)
	}
}
