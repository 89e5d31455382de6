package cli

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testutil/secretscan"
)

// Nothing the agent shows — log (at debug), events, JSON API, metrics,
// status page — carries a secret: the apps' root passwords, the API
// token, the agent's own bearer token.
func TestAgent_secretsNeverShown(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	const pw, bearer = "agent-root-pw-91c2e", "agent-bearer-5d0b7a"
	m := writeManifest(t, strings.ReplaceAll(appManifest, "MEMORY", "512")+"    password: "+pw+"\n    backup: {schedule: \"@daily\", keep: 1}\n")
	c.mustRun("apply", "-f", m, "--auto-approve")
	var secrets secretscan.Set
	secrets.Add(t, "app password", pw)
	secrets.Add(t, "agent bearer token", bearer)
	secrets.AddToken(t, "operator token secret", c.srv.Credentials().OperatorToken)

	// At debug level, everything the agent and the API client log.
	var logs syncBuffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	prev := slog.Default()
	slog.SetDefault(log)
	defer slog.SetDefault(prev)
	r := c.newAgentRigLog(m, "reconcile", time.Now(), func(a *agentArgs) { a.authToken = bearer }, log)
	ag := r.ag
	r.tick()
	c.drift(m, "1024")
	r.clock.Add(time.Minute)
	r.tick()
	if r.metric("corral_agent_reconciles_total", "result", "applied") != 1 || r.metric("corral_agent_backups_total", "app", "notes", "result", "ok") != 1 {
		t.Fatalf("the rounds did not reconcile and back up: %+v", r.events("", 0))
	}
	srv := httptest.NewServer(ag.Handler(bearer))
	defer srv.Close()
	for _, p := range []string{"/", "/metrics", "/api/v1/apps", "/api/v1/events", "/healthz"} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+p, nil)
		req.Header.Set("Authorization", "Bearer "+bearer)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d", p, resp.StatusCode)
		}
		secrets.Check(t, p, string(b))
	}
	secrets.Check(t, "agent log", logs.String())
	if !strings.Contains(logs.String(), `"level":"DEBUG"`) {
		t.Errorf("no debug lines logged: the scan proves little")
	}
}
