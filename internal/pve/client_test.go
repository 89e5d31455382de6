package pve_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/pve"
)

func TestNew_token(t *testing.T) {
	tests := []struct {
		name  string
		token string
		ok    bool
	}{
		{"valid", testToken, true},
		{"valid with newline", testToken + "\n", true},
		{"empty", "", false},
		{"secret only", testSecret, false},
		{"no secret", testTokenID + "=", false},
		{"no token name", "ctl@pve=" + testSecret, false},
		{"no realm", "ctl!ctl=" + testSecret, false},
		{"empty user", "@pve!ctl=" + testSecret, false},
		{"whitespace inside", "ctl@pve!ctl=" + testSecret[:8] + " " + testSecret[8:], false},
		{"username password style", "root@pam:" + testSecret, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := pve.New(pve.Config{Endpoint: "https://pve.example.com:8006", Token: tt.token})
			if got := err == nil; got != tt.ok {
				t.Fatalf("New(token)=%v, want ok=%v", err, tt.ok)
			}
			if err != nil {
				if !errors.Is(err, pve.ErrInvalidToken) {
					t.Errorf("err = %v, want ErrInvalidToken", err)
				}
				noSecret(t, "token error", err.Error())
				// Even a partial secret must not leak.
				noSecret(t, "token error", strings.ReplaceAll(err.Error(), " ", ""))
				if strings.Contains(err.Error(), testSecret[:8]) {
					t.Errorf("token error echoes part of the secret: %v", err)
				}
			}
		})
	}
}

func TestNew_endpoint(t *testing.T) {
	tests := []struct {
		endpoint string
		want     string // "" means error
	}{
		{"https://pve.example.com:8006", "https://pve.example.com:8006/api2/json"},
		{"https://pve.example.com:8006/", "https://pve.example.com:8006/api2/json"},
		{"https://pve.example.com:8006/api2/json", "https://pve.example.com:8006/api2/json"},
		{"https://pve.example.com:8006/api2/json/", "https://pve.example.com:8006/api2/json"},
		{"https://proxy.example.com/pve/api2/json", "https://proxy.example.com/pve/api2/json"},
		{"http://127.0.0.1:8006", "http://127.0.0.1:8006/api2/json"},
		{"pve.example.com:8006", ""},
		{"", ""},
		{"ftp://pve", ""},
		{"https://user:pw@pve:8006", ""},
		{"ftp://user:pw@pve", ""},
		{"https://user:pw%zz@pve:8006", ""},
		{"user:pw@pve:8006", ""},
	}
	for _, tt := range tests {
		t.Run(tt.endpoint, func(t *testing.T) {
			c, err := pve.New(pve.Config{Endpoint: tt.endpoint, Token: testToken})
			if tt.want == "" {
				if err == nil {
					t.Fatalf("New(%q) succeeded, want error", tt.endpoint)
				}
				if strings.Contains(err.Error(), ":pw") {
					t.Errorf("endpoint error echoes credentials: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			if got := c.Endpoint(); got != tt.want {
				t.Errorf("Endpoint()=%q, want %q", got, tt.want)
			}
		})
	}
}

// Every request carries PVE's token header, and paths are rooted at
// /api2/json whichever endpoint form was configured.
func TestClient_requestShape(t *testing.T) {
	for _, suffix := range []string{"", "/api2/json", "/api2/json/"} {
		t.Run("suffix="+suffix, func(t *testing.T) {
			var gotPath, gotAuth, gotUA string
			c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gotPath, gotAuth, gotUA = r.URL.Path, r.Header.Get("Authorization"), r.Header.Get("User-Agent")
				writeData(w, map[string]string{"version": "9.1.2", "release": "9.1", "repoid": "0123abcd"})
			}), func(cfg *pve.Config) { cfg.Endpoint += suffix })
			v, err := c.Version(ctx(t))
			if err != nil {
				t.Fatalf("Version: %v", err)
			}
			if diff := cmp.Diff(&pve.Version{Version: "9.1.2", Release: "9.1", RepoID: "0123abcd"}, v); diff != "" {
				t.Errorf("Version (-want +got):\n%s", diff)
			}
			if got, want := gotPath, "/api2/json/version"; got != want {
				t.Errorf("path=%q, want %q", got, want)
			}
			if got, want := gotAuth, "PVEAPIToken="+testToken; got != want {
				t.Errorf("Authorization=%q, want %q", got, want)
			}
			if got, want := gotUA, "corral"; got != want {
				t.Errorf("User-Agent=%q, want %q", got, want)
			}
		})
	}
}

// Property strings hold commas; form encoding must deliver them intact.
func TestClient_formEncoding(t *testing.T) {
	const mp0 = "local-lvm:vm-999-disk-1,mp=/home/hermes"
	var gotCT string
	var gotForm, gotQuery url.Values
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotCT = r.Header.Get("Content-Type")
		gotQuery = r.URL.Query()
		if err := r.ParseForm(); err != nil {
			t.Errorf("ParseForm: %v", err)
		}
		gotForm = r.PostForm
		writeData(w, nil)
	}))
	params := url.Values{"mp0": {mp0}, "delete": {"unused0,mp1"}, "description": {"a = b & c"}}
	u := &pve.ConfigUpdate{MountPoints: map[int]pve.MountPoint{0: {Volume: "local-lvm:vm-999-disk-1", Path: "/home/hermes"}},
		Delete: []string{"unused0", "mp1"}, Description: pve.Ptr("a = b & c")}
	if err := c.UpdateContainerConfig(ctx(t), "pve", 999, u); err != nil {
		t.Fatalf("UpdateContainerConfig: %v", err)
	}
	if got, want := gotCT, "application/x-www-form-urlencoded"; got != want {
		t.Errorf("Content-Type=%q, want %q", got, want)
	}
	if diff := cmp.Diff(params, gotForm); diff != "" {
		t.Errorf("form (-want +got):\n%s", diff)
	}
	if len(gotQuery) != 0 {
		t.Errorf("PUT sent a query string: %v", gotQuery)
	}
}

// GET and DELETE put their parameters in the query string.
func TestClient_queryParams(t *testing.T) {
	type seen struct {
		Method string
		Query  url.Values
		Body   string
	}
	var got []seen
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, seen{r.Method, r.URL.Query(), string(b)})
		if r.Method == http.MethodGet {
			writeData(w, []any{})
			return
		}
		writeData(w, "UPID:pve:0003A1B2:0151C6E4:69F479A0:vzdestroy:101:ctl@pve!ctl:")
	}))
	if _, err := c.ClusterResources(ctx(t), "vm"); err != nil {
		t.Fatalf("ClusterResources: %v", err)
	}
	if _, err := c.DestroyContainer(ctx(t), "pve", 101, pve.DestroyOptions{Purge: true, DestroyUnreferencedDisks: new(false)}); err != nil {
		t.Fatalf("DestroyContainer: %v", err)
	}
	want := []seen{
		{"GET", url.Values{"type": {"vm"}}, ""},
		{"DELETE", url.Values{"purge": {"1"}, "destroy-unreferenced-disks": {"0"}}, ""},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

func TestClient_retries(t *testing.T) {
	tests := []struct {
		name      string
		method    string
		failures  int // answers before success
		fail      func(t *testing.T, w http.ResponseWriter)
		wantCalls int32
		wantErr   bool
	}{
		{"GET retried on 503", "GET", 2, func(t *testing.T, w http.ResponseWriter) { writeError(t, w, 503, "Service Unavailable", nil) }, 3, false},
		{"GET retried on generic 500", "GET", 1, func(t *testing.T, w http.ResponseWriter) {
			writeError(t, w, 500, "cfs-lock 'file-storage_cfg' error: got lock request timeout", nil)
		}, 2, false},
		{"GET retried on dropped connection", "GET", 2, dropConnection, 3, false},
		{"GET gives up after 4 tries", "GET", 10, func(t *testing.T, w http.ResponseWriter) { writeError(t, w, 502, "Bad Gateway", nil) }, 4, true},
		{"GET not retried on missing CT", "GET", 5, func(t *testing.T, w http.ResponseWriter) {
			writeError(t, w, 500, "Configuration file 'nodes/pve/lxc/4242.conf' does not exist", nil)
		}, 1, true},
		{"GET not retried on 400", "GET", 5, func(t *testing.T, w http.ResponseWriter) {
			writeError(t, w, 400, "Parameter verification failed.", nil)
		}, 1, true},
		{"POST not retried on 503", "POST", 1, func(t *testing.T, w http.ResponseWriter) { writeError(t, w, 503, "Service Unavailable", nil) }, 1, true},
		{"POST not retried on dropped connection", "POST", 1, dropConnection, 1, true},
		{"PUT not retried on 500", "PUT", 1, func(t *testing.T, w http.ResponseWriter) { writeError(t, w, 500, "got timeout", nil) }, 1, true},
		{"DELETE not retried on 500", "DELETE", 1, func(t *testing.T, w http.ResponseWriter) { writeError(t, w, 500, "got timeout", nil) }, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if n := calls.Add(1); int(n) <= tt.failures {
					tt.fail(t, w)
					return
				}
				writeData(w, "ok")
			}))
			var out string
			var err error
			switch tt.method {
			case "GET":
				err = c.Get(ctx(t), "/x", nil, &out)
			case "POST":
				err = c.Post(ctx(t), "/x", nil, &out)
			case "PUT":
				err = c.Put(ctx(t), "/x", nil, &out)
			case "DELETE":
				err = c.Delete(ctx(t), "/x", nil, &out)
			}
			if got := err != nil; got != tt.wantErr {
				t.Errorf("err = %v, want error %v", err, tt.wantErr)
			}
			if got := calls.Load(); got != tt.wantCalls {
				t.Errorf("server saw %d calls, want %d", got, tt.wantCalls)
			}
			if !tt.wantErr && out != "ok" {
				t.Errorf("out=%q, want ok", out)
			}
		})
	}
}

// dropConnection closes the connection without an answer.
func dropConnection(t *testing.T, w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		t.Errorf("hijack: %v", err)
		return
	}
	conn.Close()
}

// A cancelled context ends a GET's retry wait.
func TestClient_retryHonoursContext(t *testing.T) {
	c, cancel := context.WithCancel(t.Context())
	var calls atomic.Int32
	client := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		writeError(t, w, 503, "Service Unavailable", nil)
	}), func(cfg *pve.Config) {
		cfg.HTTPClient = &http.Client{Transport: cancelAfterResponse{next: cfg.HTTPClient.Transport, cancel: cancel}}
	})
	err := client.Get(c, "/version", nil, nil)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled in the chain", err)
	}
	var ae *pve.APIError
	if !errors.As(err, &ae) || ae.Status != 503 {
		t.Errorf("err = %v, want the last APIError (503) in the chain", err)
	}
	if got := calls.Load(); got != 1 {
		t.Errorf("server saw %d calls, want 1", got)
	}
}

// cancelAfterResponse buffers each response and cancels when the caller
// closes its body, so the caller has the whole answer and finds its
// context done right after. (Cancelling before RoundTrip returned raced
// with net/http, which may then answer with the context's error instead
// of the response: CI saw it under load.)
type cancelAfterResponse struct {
	next   http.RoundTripper
	cancel context.CancelFunc
}

func (c cancelAfterResponse) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = cancelOnClose{Reader: bytes.NewReader(b), cancel: c.cancel}
	return resp, err
}

type cancelOnClose struct {
	io.Reader
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error {
	c.cancel()
	return nil
}

func TestRetryPolicy_Do(t *testing.T) {
	tests := []struct {
		name      string
		answers   []string // "" = success, else a 500 message
		maxWait   time.Duration
		wantCalls int32
		wantErr   func(error) bool
	}{
		{"locked then free", []string{"CT is locked (backup)", "CT is locked (backup)", ""}, time.Minute, 3, func(err error) bool { return err == nil }},
		{"flock timeout then free", []string{"can't lock file '/run/lock/lxc/pve-config-101.lock' - got timeout", ""}, time.Minute, 2, func(err error) bool { return err == nil }},
		{"other error not retried", []string{"CT 101 not running", ""}, time.Minute, 1, func(err error) bool { return err != nil && !pve.IsLocked(err) }},
		{"gives up after maxWait", []string{"CT is locked (backup)"}, time.Nanosecond, 1, pve.IsLocked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := int(calls.Add(1)) - 1
				msg := tt.answers[min(n, len(tt.answers)-1)]
				if msg != "" {
					writeError(t, w, 500, msg, nil)
					return
				}
				writeData(w, nil)
			}))
			p := pve.RetryLocked
			p.MaxWait, p.First, p.Max = tt.maxWait, time.Millisecond, 2*time.Millisecond
			err := p.Do(ctx(t), func() error {
				return c.UpdateContainerConfig(ctx(t), "pve", 101, &pve.ConfigUpdate{Memory: pve.Ptr[int64](1024)})
			})
			if !tt.wantErr(err) {
				t.Errorf("unexpected err = %v", err)
			}
			if got := calls.Load(); got != tt.wantCalls {
				t.Errorf("server saw %d calls, want %d", got, tt.wantCalls)
			}
		})
	}
}

func TestRetryPolicy_Delay(t *testing.T) {
	for _, tt := range []struct {
		name string
		p    pve.RetryPolicy
		want []time.Duration
	}{
		{"read", pve.RetryRead, []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 2 * time.Second}},
		{"locked", pve.RetryLocked, []time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1600 * time.Millisecond, 2 * time.Second, 2 * time.Second}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for n, want := range tt.want {
				if got := tt.p.Delay(n); got != want {
					t.Errorf("Delay(%d)=%v, want %v", n, got, want)
				}
			}
		})
	}
}

func TestRetryPolicy_DoAttemptsAndContext(t *testing.T) {
	boom := errors.New("boom")
	p := pve.RetryPolicy{Retryable: func(error) bool { return true }, Attempts: 3, First: time.Millisecond, Max: time.Millisecond}
	var n int
	if err := p.Do(context.Background(), func() error { n++; return boom }); err != boom || n != 3 {
		t.Errorf("Do = %v after %d calls, want boom after 3", err, n)
	}
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	p.Attempts = 0
	if err := p.Do(cctx, func() error { return boom }); !errors.Is(err, context.Canceled) {
		t.Errorf("Do with a done ctx = %v, want context.Canceled", err)
	}
	p.Retryable = nil
	n = 0
	if err := p.Do(context.Background(), func() error { n++; return boom }); err != boom || n != 1 {
		t.Errorf("Do with no Retryable = %v after %d calls, want boom after 1", err, n)
	}
}

// No more than MaxConcurrent requests are in flight at once.
func TestClient_maxConcurrent(t *testing.T) {
	const limit, total = 2, 6
	var inFlight, peak atomic.Int32
	arrived := make(chan struct{}, total)
	release := make(chan struct{})
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		arrived <- struct{}{}
		<-release
		inFlight.Add(-1)
		writeData(w, nil)
	}), func(cfg *pve.Config) { cfg.MaxConcurrent = limit })

	var wg sync.WaitGroup
	for range total {
		wg.Go(func() {
			if err := c.Post(ctx(t), "/x", nil, nil); err != nil {
				t.Errorf("Post: %v", err)
			}
		})
	}
	// Hold the first batch until it has arrived, then let one request
	// finish per new arrival: a broken limit lets all of them in at once.
	for range limit {
		<-arrived
	}
	for range total - limit {
		release <- struct{}{}
		<-arrived
	}
	for range limit {
		release <- struct{}{}
	}
	wg.Wait()
	if got := peak.Load(); got > limit {
		t.Errorf("peak in-flight requests = %d, want <= %d", got, limit)
	}
}

// A volid with a slash travels as one escaped path segment.
func TestClient_pathEscaping(t *testing.T) {
	var gotRaw, gotPath string
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotRaw, gotPath = r.URL.EscapedPath(), r.URL.Path
		writeData(w, map[string]any{"format": "tar.zst", "path": "/var/lib/vz/dump/x", "size": 1, "used": 1})
	}))
	const volid = "local:backup/vzdump-lxc-101-2026_05_01-10_04_00.tar.zst"
	if _, err := c.VolumeInfo(ctx(t), "pve", "local", volid); err != nil {
		t.Fatalf("VolumeInfo: %v", err)
	}
	if got, want := gotRaw, "/api2/json/nodes/pve/storage/local/content/local:backup%2Fvzdump-lxc-101-2026_05_01-10_04_00.tar.zst"; got != want {
		t.Errorf("escaped path=%q, want %q", got, want)
	}
	if got, want := gotPath, "/api2/json/nodes/pve/storage/local/content/"+volid; got != want {
		t.Errorf("path=%q, want %q", got, want)
	}
}

// A plain-http endpoint off the loopback would send the token in clear
// text: New refuses it before dialling unless AllowPlainHTTP is set, and
// then warns. Loopback (the emulator) stays allowed without a word.
func TestNew_plainHTTP(t *testing.T) {
	for _, tt := range []struct {
		endpoint string
		refused  bool
	}{
		{"http://pve.example.com:8006", true},
		{"http://192.0.2.10:8006", true},
		{"http://[2001:db8::1]:8006", true},
		{"http://localhost.example.com:8006", true},
		{"http://127.0.0.1:8006", false},
		{"http://127.9.9.9:8006", false},
		{"http://[::1]:8006", false},
		{"http://localhost:8006", false},
		{"https://pve.example.com:8006", false},
	} {
		for _, allow := range []bool{false, true} {
			var logs bytes.Buffer
			var mu sync.Mutex
			var dials []string
			dialed := func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(dials) }
			log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			c, err := pve.New(pve.Config{Endpoint: tt.endpoint, Token: testToken, Logger: log, AllowPlainHTTP: allow,
				// One try: the dial below fails and is not what is tested.
				ReadRetry: pve.RetryPolicy{Attempts: 1},
				DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
					mu.Lock()
					dials = append(dials, addr)
					mu.Unlock()
					return nil, errors.New("test dialer: no network")
				}})
			noSecret(t, "warning", logs.String())
			if tt.refused && !allow {
				if !errors.Is(err, pve.ErrPlainHTTP) {
					t.Errorf("New(%q): %v, want ErrPlainHTTP", tt.endpoint, err)
				}
				if err != nil {
					noSecret(t, "error", err.Error())
				}
				if d := dialed(); len(d) != 0 {
					t.Errorf("New(%q) dialled %v", tt.endpoint, d)
				}
				continue
			}
			if err != nil {
				t.Fatalf("New(%q, allow=%v): %v", tt.endpoint, allow, err)
			}
			if got := strings.Contains(logs.String(), "clear text"); got != tt.refused {
				t.Errorf("New(%q, allow=%v) warned=%v, want %v:\n%s", tt.endpoint, allow, got, tt.refused, logs.String())
			}
			// The dialer is the transport's: a request reaches it (once
			// is enough to show that the refusal above happened first).
			if tt.endpoint == "http://192.0.2.10:8006" {
				if _, err := c.Version(context.Background()); err == nil || len(dialed()) == 0 || dialed()[0] != "192.0.2.10:8006" {
					t.Errorf("New(%q): request did not go through the configured dialer (err %v, dials %v)", tt.endpoint, err, dialed())
				}
			}
		}
	}
}

// A connection closed without an answer says so, not a bare EOF (issue
// 12, item 5).
func TestClient_droppedConnectionExplained(t *testing.T) {
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	err := c.Get(ctx(t), "/nodes", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "the connection was closed before PVE answered") {
		t.Fatalf("err = %v", err)
	}
}
