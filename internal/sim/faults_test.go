package sim

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestParseFaults(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		spec string
		want FaultSpec
		err  string
	}{
		{"", FaultSpec{Seed: 1}, ""},
		{"seed=7,latency=20ms,read5xx=0.05,write5xx=0.02,drop=0.01,taskfail=0.5,match=/lxc/",
			FaultSpec{Seed: 7, Latency: 20 * time.Millisecond, Read5xx: 0.05, Write5xx: 0.02, Drop: 0.01, TaskFail: 0.5, Match: "/lxc/"}, ""},
		{"read5xx=2", FaultSpec{}, "read5xx=2: want a rate between 0 and 1"},
		{"drop=-0.1", FaultSpec{}, "drop=-0.1: want a rate between 0 and 1"},
		{"latency=soon", FaultSpec{}, "latency=soon: "},
		{"speed=1", FaultSpec{}, `unknown key "speed"`},
		{"read5xx", FaultSpec{}, `"read5xx": want key=value`},
	} {
		f, err := parseFaults(c.spec)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want %q", c.spec, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.spec, err)
			continue
		}
		if got := f.get(); got != c.want {
			t.Errorf("%q: %+v, want %+v", c.spec, got, c.want)
		}
	}
	if _, err := New(Options{Dir: t.TempDir(), Faults: "bogus=1"}); err == nil || !strings.Contains(err.Error(), "--faults") {
		t.Errorf("New with a bad spec: %v", err)
	}
}

// TestFaults checks over HTTPS that each fault does what faults.go
// promises, and that a failing write changes nothing.
func TestFaults(t *testing.T) {
	t.Parallel()
	k := newE2E(t)
	op := k.op()
	k.create(op, "140", nil)
	const injected = "injected fault: service temporarily unavailable\n"

	t.Run("read5xx", func(t *testing.T) {
		k := k.sub(t)
		k.setFaults(FaultSpec{Seed: 1, Read5xx: 1, Match: "/lxc"})
		if r := k.do(op, http.MethodGet, "/nodes/pve/lxc", nil); r.status != 500 || r.msg != injected || string(r.raw["data"]) != "null" {
			t.Errorf("GET under read5xx=1: %d %q", r.status, r.msg)
		}
		k.ok(op, http.MethodGet, "/version", nil, nil) // not matched
		k.ok(op, http.MethodPut, "/nodes/pve/lxc/140/config", url.Values{"cores": {"2"}}, nil)
	})
	t.Run("write5xx", func(t *testing.T) {
		k := k.sub(t)
		k.setFaults(FaultSpec{Seed: 1, Write5xx: 1})
		if r := k.do(op, http.MethodPut, "/nodes/pve/lxc/140/config", url.Values{"cores": {"3"}}); r.status != 500 || r.msg != injected {
			t.Errorf("PUT under write5xx=1: %d %q", r.status, r.msg)
		}
		k.setFaults(FaultSpec{Seed: 1})
		if got := k.config("140", false)["cores"]; got != float64(2) {
			t.Errorf("cores = %v after a failed write; the fault must strike before any change", got)
		}
	})
	t.Run("drop", func(t *testing.T) {
		k := k.sub(t)
		k.setFaults(FaultSpec{Seed: 1, Drop: 1})
		resp, err := k.hc.Do(k.request(op, http.MethodGet, "/nodes/pve/lxc", nil))
		if err == nil {
			resp.Body.Close()
			t.Errorf("drop=1 answered %s", resp.Status)
		}
		k.setFaults(FaultSpec{Seed: 1})
	})
	t.Run("latency", func(t *testing.T) {
		k := k.sub(t)
		k.setFaults(FaultSpec{Seed: 1, Latency: 30 * time.Millisecond})
		start := time.Now()
		k.ok(op, http.MethodGet, "/version", nil, nil)
		// A lower bound only: the fault sleeps at least this long.
		if d := time.Since(start); d < 30*time.Millisecond {
			t.Errorf("request took %v under latency=30ms", d)
		}
		k.setFaults(FaultSpec{Seed: 1})
	})
	t.Run("taskfail", func(t *testing.T) {
		k := k.sub(t)
		k.setFaults(FaultSpec{Seed: 1, TaskFail: 1})
		st := k.task(op, http.MethodPost, "/nodes/pve/lxc/140/status/start", nil)
		if st.ExitStatus != "injected fault: task vzstart 140 failed" {
			t.Errorf("start under taskfail=1 ended %q", st.ExitStatus)
		}
		cr := k.task(op, http.MethodPost, "/nodes/pve/lxc", url.Values{"vmid": {"141"}, "ostemplate": {"local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst"}, "rootfs": {"local-lvm:1"}, "unprivileged": {"1"}})
		if cr.ExitStatus != "injected fault: task vzcreate 141 failed" {
			t.Errorf("create under taskfail=1 ended %q", cr.ExitStatus)
		}
		k.setFaults(FaultSpec{Seed: 1})
		var cur struct {
			Status string `json:"status"`
		}
		k.ok(op, http.MethodGet, "/nodes/pve/lxc/140/status/current", nil, &cur)
		if cur.Status != "stopped" {
			t.Errorf("CT 140 is %s after a failed start", cur.Status)
		}
		// The injected failure is a worker that died at its start: nothing
		// cleaned up, so the CT keeps "lock: create", as on PVE, and only
		// root on the host (pct unlock) gets it back. corral's apply
		// relies on exactly this.
		var conf map[string]any
		k.ok(op, http.MethodGet, "/nodes/pve/lxc/141/config", nil, &conf)
		if conf["lock"] != "create" {
			t.Errorf("CT 141 after its create task died: %v", conf)
		}
		if r := k.do(op, http.MethodDelete, "/nodes/pve/lxc/141", nil); r.status != 500 || r.msg != "CT is locked (create)\n" {
			t.Errorf("destroy of the half-made CT: %d %q", r.status, r.msg)
		}
	})
	t.Run("deterministic", func(t *testing.T) {
		k := k.sub(t)
		run := func() string {
			k.setFaults(FaultSpec{Seed: 42, Read5xx: 0.5})
			var b strings.Builder
			for range 32 {
				if k.do(op, http.MethodGet, "/version", nil).status == 200 {
					b.WriteByte('.')
				} else {
					b.WriteByte('x')
				}
			}
			return b.String()
		}
		a, b := run(), run()
		if a != b || !strings.Contains(a, "x") || !strings.Contains(a, ".") {
			t.Errorf("seed 42 at rate 0.5 gave %s then %s; want the same mix twice", a, b)
		}
		k.setFaults(FaultSpec{Seed: 1})
	})
}

// setFaults replaces the fault spec through the admin API.
func (k *e2e) setFaults(spec FaultSpec) {
	k.t.Helper()
	b, _ := json.Marshal(spec)
	req := k.request(k.root(), http.MethodPost, "/x", nil)
	req.URL.Path = "/_corral/faults"
	req.Body = nopBody(string(b))
	req.Header.Set("Content-Type", "application/json")
	if r := k.send(req); r.status != 200 {
		k.t.Fatalf("set faults: %d %q", r.status, r.msg)
	}
}

// TestRequestLogKeys: the request log counts by schema template, also a
// request failed by an injected fault, and every unknown path under one
// key.
func TestRequestLogKeys(t *testing.T) {
	t.Parallel()
	k := openE2E(t, Options{Dir: t.TempDir(), TimeScale: zeroScale()})
	k.srv.SetFaults(FaultSpec{Seed: 1, Read5xx: 1, Match: "/status/current"})
	k.do(k.op(), http.MethodGet, "/nodes/pve/lxc/100/status/current", nil)
	k.do(k.op(), http.MethodGet, "/no/such/path/1", nil)
	k.do(k.op(), http.MethodGet, "/no/such/path/2", nil)
	rows, total := k.srv.Requests()
	got := map[string]int{}
	for _, r := range rows {
		got[r.Endpoint] = r.Count
	}
	want := map[string]int{"GET /nodes/{node}/lxc/{vmid}/status/current": 1, "GET (unknown path)": 2}
	if total != 3 || len(got) != len(want) {
		t.Fatalf("request log %v (total %d), want %v", got, total, want)
	}
	for key, n := range want {
		if got[key] != n {
			t.Errorf("%s counted %d, want %d", key, got[key], n)
		}
	}
}
