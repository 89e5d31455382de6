package pve

import (
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// logTransport logs each HTTP exchange at Debug: method, path, status,
// elapsed, the request headers with credentials redacted, and the names
// (never the values) of form parameters. Bodies are never logged; requests
// to /access/ticket, whose body is a password, log no parameters at all.
type logTransport struct {
	next http.RoundTripper
	log  *slog.Logger
}

// redactedHeaders hold credentials: PVE's token header, the ticket cookie
// and the CSRF token that goes with it.
var redactedHeaders = []string{"Authorization", "Cookie", "CSRFPreventionToken"}

func (t *logTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if !t.log.Enabled(ctx, slog.LevelDebug) {
		return t.next.RoundTrip(req)
	}
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	attrs := []slog.Attr{
		slog.String("method", req.Method),
		slog.String("path", req.URL.Path),
		slog.Duration("elapsed", time.Since(start)),
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	} else {
		attrs = append(attrs, slog.Int("status", resp.StatusCode))
	}
	if names := paramNames(req); len(names) > 0 {
		attrs = append(attrs, slog.Any("params", names))
	}
	attrs = append(attrs, slog.Any("header", redactHeader(req.Header)))
	t.log.LogAttrs(ctx, slog.LevelDebug, "http", attrs...)
	return resp, err
}

// redactHeader copies h with credential values replaced. The token id of
// a PVEAPIToken header is kept: it says which token was used.
func redactHeader(h http.Header) http.Header {
	out := h.Clone()
	for _, k := range redactedHeaders {
		vs := out.Values(k)
		if len(vs) == 0 {
			continue
		}
		red := make([]string, len(vs))
		for i, v := range vs {
			red[i] = "REDACTED"
			if rest, ok := strings.CutPrefix(v, "PVEAPIToken="); ok {
				if id, _, ok := strings.Cut(rest, "="); ok {
					red[i] = "PVEAPIToken=" + id + "=REDACTED"
				}
			}
		}
		out[http.CanonicalHeaderKey(k)] = red
	}
	return out
}

// paramNames returns the sorted parameter names of a request, from the
// query or a form body (read through GetBody, leaving the body intact).
func paramNames(req *http.Request) []string {
	if strings.Contains(req.URL.Path, "/access/ticket") {
		return nil
	}
	vals := req.URL.Query()
	if ct, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type")); ct == "application/x-www-form-urlencoded" && req.GetBody != nil {
		if body, err := req.GetBody(); err == nil {
			b, _ := io.ReadAll(io.LimitReader(body, 1<<20))
			body.Close()
			if form, err := url.ParseQuery(string(b)); err == nil {
				for k, v := range form {
					vals[k] = v
				}
			}
		}
	}
	names := make([]string, 0, len(vals))
	for k := range vals {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}
