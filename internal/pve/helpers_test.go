package pve_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/testutil/refdata"
)

// The token every test client uses. The secret must appear in no log line
// and no error string.
const (
	testTokenID = "ctl@pve!ctl"
	testSecret  = "0d5f8e2a-51c3-4b0e-9d7a-6f1c2b3a4e5d"
	testToken   = testTokenID + "=" + testSecret
)

// newTestClient starts a TLS test server for h and returns a client that
// trusts it through Config.HTTPClient, with millisecond retry delays.
func newTestClient(t *testing.T, h http.Handler, mod ...func(*pve.Config)) *pve.Client {
	t.Helper()
	srv := httptest.NewTLSServer(h)
	t.Cleanup(srv.Close)
	cfg := pve.Config{Endpoint: srv.URL, Token: testToken, HTTPClient: srv.Client()}
	for _, m := range mod {
		m(&cfg)
	}
	c, err := pve.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	pve.FastRetries(c)
	return c
}

// writeData answers 200 {"data": data}.
func writeData(w http.ResponseWriter, data any) {
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	json.NewEncoder(w).Encode(map[string]any{"data": data})
}

// writeBody answers 200 with a raw JSON body.
func writeBody(w http.ResponseWriter, body []byte) {
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	w.Write(body)
}

// writeStatus answers status with PVE's reason phrase (the message's first
// line) and body, as pve-http-server does. net/http always writes the
// standard phrase, so the response is written on the hijacked connection.
func writeStatus(t *testing.T, w http.ResponseWriter, status int, reason string, body []byte) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		t.Errorf("response writer cannot hijack")
		return
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		t.Errorf("hijack: %v", err)
		return
	}
	defer conn.Close()
	fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\nContent-Type: application/json;charset=UTF-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", status, reason, len(body))
	buf.Write(body)
	buf.Flush()
}

// writeError answers like PVE for message (and param errors, for a 400).
func writeError(t *testing.T, w http.ResponseWriter, status int, message string, params map[string]string) {
	body := map[string]any{"data": nil, "message": message + "\n"}
	if params != nil {
		body["errors"] = params
	}
	b, _ := json.Marshal(body)
	writeStatus(t, w, status, strings.SplitN(message, "\n", 2)[0], b)
}

// fixture returns the body of a success fixture, skipping when absent.
func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(refdata.Dir(t), "pve-api", "fixtures", name))
	if err != nil {
		t.Fatalf("read fixture: %v", err)
	}
	return b
}

// errorFixture is an error-*.json fixture: the status line and body.
type errorFixture struct {
	Status int
	Reason string
	Body   json.RawMessage
}

func loadErrorFixture(t *testing.T, name string) errorFixture {
	t.Helper()
	var raw struct {
		HTTP string          `json:"_http"`
		Body json.RawMessage `json:"body"`
	}
	if err := json.Unmarshal(fixture(t, name), &raw); err != nil {
		t.Fatalf("decode %s: %v", name, err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(raw.HTTP+"\r\n\r\n")), nil)
	if err != nil {
		t.Fatalf("%s: status line %q: %v", name, raw.HTTP, err)
	}
	return errorFixture{Status: resp.StatusCode, Reason: strings.TrimPrefix(resp.Status, fmt.Sprint(resp.StatusCode)+" "), Body: raw.Body}
}

// serve writes f as the server would.
func (f errorFixture) serve(t *testing.T, w http.ResponseWriter) {
	writeStatus(t, w, f.Status, f.Reason, f.Body)
}

// noSecret fails the test if s contains the token secret.
func noSecret(t *testing.T, what, s string) {
	t.Helper()
	if strings.Contains(s, testSecret) {
		t.Errorf("%s contains the token secret: %s", what, s)
	}
}

// ctx is a test context.
func ctx(t *testing.T) context.Context { return t.Context() }
