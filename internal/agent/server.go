package agent

import (
	"crypto/subtle"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/corralhq/corral/internal/ui/human"
)

//go:embed status.html
var pageFS embed.FS

// page is the status page's template, parsed at its first use rather
// than at package init: every corral process links this package, and
// parsing it was a fifth of the binary's init time.
var page = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("status.html").Funcs(template.FuncMap{
		"ago": func(now, t time.Time) string {
			if t.IsZero() {
				return "never"
			}
			d := now.Sub(t).Round(time.Second)
			if d < 0 {
				d = 0
			}
			return d.String() + " ago"
		},
		"size":  human.Size,
		"short": short,
		"utc":   func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
	}).ParseFS(pageFS, "status.html"))
})

// CheckListen refuses an address off the loopback unless a token
// protects the server: the status page and API show the cluster's apps,
// addresses and errors to whoever reaches them.
func CheckListen(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("--listen %q: want HOST:PORT, e.g. 127.0.0.1:9120: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	if token == "" {
		return fmt.Errorf("--listen %s is not a loopback address: anyone who reaches it would read the status of every app; "+
			"pass --auth-token (or CORRAL_AGENT_TOKEN) to require a bearer token, or listen on 127.0.0.1", addr)
	}
	return nil
}

// Handler serves /healthz, /metrics, /api/v1/apps, /api/v1/events and
// the status page at /. With token set, everything but /healthz needs
// "Authorization: Bearer TOKEN" (or basic auth with TOKEN as the
// password, which a browser can send). Everything is read-only.
func (a *Agent) Handler(token string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("GET /metrics", a.metrics.reg.Handler())
	mux.HandleFunc("GET /api/v1/apps", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, a.Status())
	})
	mux.HandleFunc("GET /api/v1/events", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"events": a.Events.List()})
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:")
		ev := a.Events.List()
		if len(ev) > 50 {
			ev = ev[:50]
		}
		if err := page().Execute(w, map[string]any{"S": a.Status(), "Events": ev}); err != nil {
			a.cfg.Log.Warn("render the status page", "error", err)
		}
	})
	var h http.Handler = mux
	if token != "" {
		h = requireToken(token, mux)
	}
	return securityHeaders(h)
}

func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

func requireToken(token string, next http.Handler) http.Handler {
	want := []byte(token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" {
			next.ServeHTTP(w, r)
			return
		}
		var got string
		if b, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			got = b
		} else if _, p, ok := r.BasicAuth(); ok {
			got = p
		}
		if subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="corral agent"`)
			http.Error(w, "unauthorized: send Authorization: Bearer <the agent's --auth-token>", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
