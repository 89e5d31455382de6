package pve_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/pve"
)

// debugClient is a test client logging at Debug as JSON into the buffer.
func debugClient(t *testing.T, h http.Handler) (*pve.Client, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return newTestClient(t, h, func(cfg *pve.Config) { cfg.Logger = log }), &logs
}

// httpLines decodes the "http" debug lines.
func httpLines(t *testing.T, logs *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] == "http" {
			out = append(out, m["pve"].(map[string]any))
		}
	}
	return out
}

func TestLogTransport(t *testing.T) {
	c, logs := debugClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api2/json/nodes/pve/lxc/101/status/current" {
			writeError(t, w, 500, "Configuration file 'nodes/pve/lxc/101.conf' does not exist", nil)
			return
		}
		writeData(w, "UPID:pve:0003A1B2:0151C6E4:69F479A0:vzcreate:101:ctl@pve!ctl:")
	}))
	if _, err := c.CreateContainer(ctx(t), "pve", &pve.ContainerCreate{VMID: 101, Password: "hunter2-root-pw", RootFS: pve.MountPoint{Volume: "local-lvm:8"}}); err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	c.ContainerStatus(ctx(t), "pve", 101)
	c.Post(ctx(t), "/access/ticket", url.Values{"username": {"root@pam"}, "password": {"hunter2-root-pw"}}, nil)

	lines := httpLines(t, logs)
	if len(lines) != 3 {
		t.Fatalf("%d http log lines, want 3:\n%s", len(lines), logs)
	}
	type summary struct {
		Method, Path string
		Status       float64
		Params       []any
		Auth         any
	}
	var got []summary
	for _, l := range lines {
		if _, ok := l["elapsed"]; !ok {
			t.Errorf("log line without elapsed: %v", l)
		}
		params, _ := l["params"].([]any)
		got = append(got, summary{l["method"].(string), l["path"].(string), l["status"].(float64), params, l["header"].(map[string]any)["Authorization"]})
	}
	auth := []any{"PVEAPIToken=" + testTokenID + "=REDACTED"}
	want := []summary{
		{"POST", "/api2/json/nodes/pve/lxc", 200, []any{"password", "rootfs", "vmid"}, auth},
		{"GET", "/api2/json/nodes/pve/lxc/101/status/current", 500, nil, auth},
		{"POST", "/api2/json/access/ticket", 200, nil, auth},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("http log lines (-want +got):\n%s", diff)
	}
	noSecret(t, "debug log", logs.String())
	if strings.Contains(logs.String(), "hunter2") {
		t.Errorf("debug log contains a request body value:\n%s", logs)
	}
}

// The token secret appears in no log line and no error string, whatever
// fails.
func TestClient_secretNeverLeaks(t *testing.T) {
	var errs []error
	c, logs := debugClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api2/json/echo":
			// A server that echoes the credentials it got.
			writeError(t, w, 401, "invalid token '"+r.Header.Get("Authorization")+"'", map[string]string{"token": r.Header.Get("Authorization")})
		case "/api2/json/drop":
			dropConnection(t, w)
		default:
			writeError(t, w, 403, "Permission check failed (/vms/101, VM.Allocate)", nil)
		}
	}))
	errs = append(errs,
		c.Get(ctx(t), "/echo", nil, nil),
		c.Post(ctx(t), "/drop", nil, nil),
		c.Put(ctx(t), "/nodes/pve/lxc/101/config", url.Values{"memory": {"512"}}, nil),
	)
	if _, err := c.WaitTask(ctx(t), "not a upid", pve.WaitOptions{}); err != nil {
		errs = append(errs, err)
	}
	for _, err := range errs {
		if err == nil {
			t.Fatalf("expected every call to fail")
		}
		noSecret(t, "error", err.Error())
		var ae *pve.APIError
		if errors.As(err, &ae) {
			for k, v := range ae.Params {
				noSecret(t, "param error "+k, v)
			}
		}
	}
	noSecret(t, "debug log", logs.String())
}
