package sim

import (
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/testenv"
)

// TestPersistence closes an emulator and opens its directory again: the
// CT, the credentials and the certificate survive; Dir/env tells a client
// everything it needs, and what it says works.
func TestPersistence(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	opts := Options{Dir: dir, TimeScale: zeroScale()}
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ka := &e2e{t: t, srv: a, dir: dir, hc: a.HTTPClient()}
	ka.create(ka.op(), "120", url.Values{"memory": {"256"}, "mp0": {"local-lvm:1,mp=/data"}})
	creds, fp := a.Credentials(), a.Fingerprint()
	if _, err := New(opts); err == nil || !strings.Contains(err.Error(), "in use by another corral emulator") {
		t.Errorf("second emulator on the same directory: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}

	k := openE2E(t, opts)
	if k.srv.Credentials() != creds {
		t.Error("credentials changed across a restart")
	}
	if k.srv.Fingerprint() != fp {
		t.Errorf("fingerprint %s, was %s before the restart", k.srv.Fingerprint(), fp)
	}
	conf := k.config("120", false)
	if conf["hostname"] != "ct120" || conf["memory"] != float64(256) || !strings.HasPrefix(fmt.Sprint(conf["mp0"]), "local-lvm:vm-120-disk-1,mp=/data") {
		t.Errorf("config after reopen: %v", conf)
	}

	// Dir/env: the five variables, mode 0600, and they work.
	st, err := os.Stat(filepath.Join(dir, "env"))
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("env mode %v, want 0600 (it holds secrets)", st.Mode().Perm())
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "env"))
	env := envFile(t, string(raw))
	for _, name := range []string{"PROXMOX_VE_ENDPOINT", "PROXMOX_VE_API_TOKEN", "PROXMOX_VE_FINGERPRINT", "PVE_ROOT_PASSWORD", "PVE_ROOT_TOKEN"} {
		if env[name] == "" {
			t.Errorf("env lacks %s:\n%s", name, raw)
		}
	}
	// Its time scale, so that corral polls tasks when they end here.
	if ts := k.srv.TimeScale(); ts == nil || env["CORRAL_SIM_TIME_SCALE"] != strconv.FormatFloat(*ts, 'g', -1, 64) {
		t.Errorf("env's CORRAL_SIM_TIME_SCALE %q, want the emulator's scale %v:\n%s", env["CORRAL_SIM_TIME_SCALE"], ts, raw)
	}
	if env["PROXMOX_VE_ENDPOINT"] != k.srv.URL() || env["PROXMOX_VE_API_TOKEN"] != creds.OperatorToken ||
		env["PVE_ROOT_TOKEN"] != creds.RootToken || env["PVE_ROOT_PASSWORD"] != creds.RootPassword {
		t.Errorf("env does not describe the running emulator:\n%s", raw)
	}
	// The fingerprint is the one of the certificate actually served.
	host := strings.TrimPrefix(env["PROXMOX_VE_ENDPOINT"], "https://")
	conn, err := tls.Dial("tcp", host, &tls.Config{InsecureSkipVerify: true}) // pinned by hand below
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(conn.ConnectionState().PeerCertificates[0].Raw)
	conn.Close()
	var hexs []string
	for _, b := range sum {
		hexs = append(hexs, fmt.Sprintf("%02X", b))
	}
	if got := strings.Join(hexs, ":"); got != env["PROXMOX_VE_FINGERPRINT"] {
		t.Errorf("served certificate %s, env says %s", got, env["PROXMOX_VE_FINGERPRINT"])
	}
	// The token from env works against the endpoint from env.
	req, _ := http.NewRequest(http.MethodGet, env["PROXMOX_VE_ENDPOINT"]+"/api2/json/nodes/pve/lxc/120/status/current", nil)
	req.Header.Set("Authorization", "PVEAPIToken="+env["PROXMOX_VE_API_TOKEN"])
	if r := k.send(req); r.status != 200 || !strings.Contains(string(r.data), `"vmid":120`) {
		t.Errorf("env token: %d %q %s", r.status, r.msg, r.data)
	}
}

// TestTaskRecovery: a task whose process died shows PVE's "unexpected
// status" once the emulator is back; one stopped by a clean shutdown ends
// with the worker's "received interrupt" (create prefixes its errors).
func TestTaskRecovery(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	one := 1.0 // real durations: a create takes seconds, long enough to catch it running
	opts := Options{Dir: dir, TimeScale: &one}
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ka := &e2e{t: t, srv: a, dir: dir, hc: a.HTTPClient()}
	upid := ka.upid(ka.op(), http.MethodPost, "/nodes/pve/lxc", url.Values{"vmid": {"130"}, "ostemplate": {"local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst"}, "rootfs": {"local-lvm:1"}, "unprivileged": {"1"}})
	// Wait for the first log line (the new disk): the worker then holds
	// the config flock and is inside create's eval, so a shutdown ends it
	// with the "unable to create" prefix, not at lock_config.
	testenv.WaitFor(t, "the create task's first log line", func() bool {
		var lines []struct {
			T string `json:"t"`
		}
		ka.ok(ka.op(), http.MethodGet, "/nodes/pve/tasks/"+url.PathEscape(upid)+"/log", nil, &lines)
		return len(lines) > 0
	})
	var st e2eTask
	ka.ok(ka.op(), http.MethodGet, "/nodes/pve/tasks/"+url.PathEscape(upid)+"/status", nil, &st)
	if st.Status != "running" {
		t.Fatalf("create task is %q right after it started; the test needs it running", st.Status)
	}
	// A crash: the state directory as it is on disk while the task runs.
	crashed := t.TempDir()
	copyDir(t, dir, crashed)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		name, dir, exit string
		ctLeft          bool // a crash leaves the config locked "create"; a clean shutdown cleans up
	}{
		{"crash", crashed, "unexpected status", true},
		{"clean shutdown", dir, "unable to create CT 130 - received interrupt", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := openE2E(t, Options{Dir: c.dir, TimeScale: zeroScale()})
			var got e2eTask
			k.ok(k.op(), http.MethodGet, "/nodes/pve/tasks/"+url.PathEscape(upid)+"/status", nil, &got)
			if got.Status != "stopped" || got.ExitStatus != c.exit {
				t.Errorf("after reopen: status %q exitstatus %q, want stopped %q", got.Status, got.ExitStatus, c.exit)
			}
			done := k.wait(k.op(), upid)
			if last := done.log[len(done.log)-1]; last != "TASK ERROR: "+c.exit {
				t.Errorf("last log line %q", last)
			}
			r := k.do(k.root(), http.MethodGet, "/nodes/pve/lxc/130/config", nil)
			if left := r.status == 200; left != c.ctLeft {
				t.Errorf("CT 130 after reopen: %d %q %s, want it there: %v", r.status, r.msg, r.data, c.ctLeft)
			} else if left && !strings.Contains(string(r.data), `"lock":"create"`) {
				t.Errorf("CT 130 left without lock create: %s", r.data)
			}
			var list []e2eTask
			k.ok(k.op(), http.MethodGet, "/nodes/pve/tasks", url.Values{"source": {"all"}}, &list)
			for _, tk := range list {
				if tk.UPID == upid && tk.Status == "running" {
					t.Errorf("task list still shows %s running", upid)
				}
			}
		})
	}
}

// copyDir copies a state directory (regular files only; the lock file is
// per process).
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		dst := filepath.Join(to, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(dst, 0o755)
		case !d.Type().IsRegular() || rel == ".lock":
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, _ := d.Info()
		return os.WriteFile(dst, b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatalf("copy %s: %v", from, err)
	}
}
