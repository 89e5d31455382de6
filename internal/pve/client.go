package pve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Config says where the API is and how to trust and authenticate to it.
type Config struct {
	// Endpoint is the API's base URL, https://host:8006, with or without
	// the /api2/json suffix.
	Endpoint string
	// Token is "user@realm!tokenid=secret", the PROXMOX_VE_API_TOKEN format.
	Token string
	// Fingerprint pins the SHA-256 fingerprint of the server's leaf
	// certificate (hex, colons optional, any case), ignoring CA chain and
	// hostname, as PVE's own tools do for self-signed hosts.
	Fingerprint string
	// CAFile is a PEM bundle of roots to trust instead of the system's.
	CAFile string
	// Insecure skips TLS verification; New logs a warning once.
	Insecure bool
	// AllowPlainHTTP lets an http:// endpoint off the loopback through
	// (New logs a warning). Without it New refuses such an endpoint with
	// ErrPlainHTTP before anything is dialled: every request carries the
	// API token, which plain http sends in clear text.
	AllowPlainHTTP bool
	// DialContext, when set, dials the connections of the transport New
	// builds (ignored with HTTPClient). Tests use it to see that nothing
	// was dialled.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// HTTPClient replaces the HTTP client, e.g. with an in-process
	// transport for tests. When set, TLS options are the caller's business
	// and Fingerprint, CAFile and Insecure are ignored. Its redirect
	// policy is replaced: the client never follows a redirect.
	HTTPClient *http.Client
	// Logger receives Debug lines for each HTTP request and Warn lines for
	// tasks that ended with warnings. Nil discards.
	Logger *slog.Logger
	// MaxConcurrent bounds requests in flight; default 8.
	MaxConcurrent int
	// UserAgent is sent with every request; default "corral".
	UserAgent string
	// ReadRetry is how a GET is repeated after a connection error or a
	// 5xx; the zero value means RetryRead. Crash tests shorten its delays
	// for a client they have "killed", whose every request then fails.
	ReadRetry RetryPolicy
	// TaskTimeScale, when the caller knows it talks to an emulator whose
	// tasks run at this fraction of Proxmox's durations (corral's own
	// local or embedded emulator, a test's), scales the default task
	// poll delays alike, so that a wait costs the same reads as on a
	// real node and a scaled test is not slowed by real-time polls. Nil
	// means real Proxmox durations; 0 (instant tasks) is taken as 0.01.
	TaskTimeScale *float64
}

// Client talks to one PVE API endpoint with one API token. It is safe for
// concurrent use; at most Config.MaxConcurrent requests are in flight.
type Client struct {
	base    *url.URL // scheme://host[:port]/api2/json
	auth    string   // Authorization header value
	secret  string   // to scrub from server messages
	tokenID string
	hc      *http.Client
	log     *slog.Logger
	sem     chan struct{}
	ua      string
	retry   RetryPolicy // GET retries on 5xx and connection errors
	clock   clock       // task waits' time and sleep
	scale   float64     // Config.TaskTimeScale, 1 when nil
	times   taskTimes   // how long each task type is expected to run
	lists   taskLists   // list reads shared by the waits of a node's tasks
	memo    *runMemo    // setup reads kept for one run (MemoizeSetup); nil: none
	// handOver passes the preflight's answers to the plan shown after it
	// (HandOverReads).
	handOver handOver
}

// New validates cfg and returns a client. It makes no request.
func New(cfg Config) (*Client, error) {
	base, err := parseEndpoint(cfg.Endpoint)
	if err != nil {
		return nil, err
	}
	tok, err := parseToken(cfg.Token)
	if err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.WithGroup("pve")
	if base.Scheme == "http" && !isLoopback(base.Hostname()) {
		if !cfg.AllowPlainHTTP {
			return nil, fmt.Errorf("endpoint %s: %w", base.Redacted(), ErrPlainHTTP)
		}
		log.Warn("the endpoint is plain http: the API token crosses the network in clear text; use https", "endpoint", base.String())
	}

	hc := cfg.HTTPClient
	if hc == nil {
		tr, err := newTransport(cfg, log)
		if err != nil {
			return nil, err
		}
		hc = &http.Client{Transport: tr}
	} else {
		copied := *hc
		hc = &copied
	}
	// PVE never redirects. Following one could resend a POST, or carry
	// the token header to plain http on the same host (net/http keeps it
	// when only the scheme or port changes): a 3xx is an APIError.
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	next := hc.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	hc.Transport = &logTransport{next: next, log: log}

	n := cfg.MaxConcurrent
	if n <= 0 {
		n = 8
	}
	ua := cfg.UserAgent
	if ua == "" {
		ua = "corral"
	}
	return &Client{
		base:    base,
		auth:    "PVEAPIToken=" + tok.id + "=" + tok.secret,
		secret:  tok.secret,
		tokenID: tok.id,
		hc:      hc,
		log:     log,
		sem:     make(chan struct{}, n),
		ua:      ua,
		retry:   readRetry(cfg.ReadRetry),
		clock:   realClock,
		scale:   taskTimeScale(cfg.TaskTimeScale),
	}, nil
}

// readRetry is p, or RetryRead when p is the zero policy.
func readRetry(p RetryPolicy) RetryPolicy {
	if p.Attempts == 0 && p.MaxWait == 0 && p.First == 0 && p.Max == 0 {
		return RetryRead
	}
	return p
}

// Endpoint is the API base URL the client talks to, ending in /api2/json.
func (c *Client) Endpoint() string { return c.base.String() }

// TokenID is the token's id, user@realm!tokenid, without the secret.
func (c *Client) TokenID() string { return c.tokenID }

// parseEndpoint accepts https://host:8006 with or without /api2/json and
// returns the URL ending in /api2/json.
func parseEndpoint(s string) (*url.URL, error) {
	const hint = "want a URL like https://pve.example.com:8006"
	if s == "" {
		return nil, fmt.Errorf("endpoint: empty; %s", hint)
	}
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		// url.Error quotes the whole input, credentials included.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("endpoint %s: %w; %s", shownEndpoint(s, nil), err, hint)
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("endpoint %s: %s", shownEndpoint(s, u), hint)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("endpoint %q: no credentials, query or fragment allowed; %s", u.Redacted(), hint)
	}
	p := strings.TrimRight(u.Path, "/")
	p = strings.TrimSuffix(p, "/api2/json")
	return &url.URL{Scheme: u.Scheme, Host: u.Host, Path: p + "/api2/json"}, nil
}

// shownEndpoint is s for an error message: with the password replaced
// when u (s parsed, or nil) has user info, and not at all when s holds
// another '@' that may follow credentials ("user:pw@host" parses as
// scheme "user").
func shownEndpoint(s string, u *url.URL) string {
	switch {
	case u != nil && u.User != nil:
		return strconv.Quote(u.Redacted())
	case strings.Contains(s, "@"):
		return "(not shown: it holds '@', perhaps after a password)"
	}
	return strconv.Quote(s)
}

// isLoopback reports whether host is localhost or a loopback address.
// Only literal addresses count: a name is never resolved here, so that
// deciding whether to refuse sends nothing over the network.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

type token struct{ id, secret string }

// parseToken splits "user@realm!tokenid=secret". Its errors never contain
// any part of s: a malformed value may be nothing but the secret.
func parseToken(s string) (token, error) {
	const want = "want user@realm!tokenid=secret"
	s = strings.TrimSpace(s)
	if s == "" {
		return token{}, fmt.Errorf("%w: empty; %s", ErrInvalidToken, want)
	}
	id, secret, ok := strings.Cut(s, "=")
	if !ok || secret == "" {
		return token{}, fmt.Errorf("%w: no '=secret' after the token id; %s", ErrInvalidToken, want)
	}
	user, name, ok := strings.Cut(id, "!")
	if !ok || name == "" {
		return token{}, fmt.Errorf("%w: no '!tokenid' in the token id; %s", ErrInvalidToken, want)
	}
	if u, realm, ok := strings.Cut(user, "@"); !ok || u == "" || realm == "" {
		return token{}, fmt.Errorf("%w: the token id does not start with user@realm; %s", ErrInvalidToken, want)
	}
	if strings.ContainsAny(s, " \t\r\n") {
		return token{}, fmt.Errorf("%w: contains whitespace; %s", ErrInvalidToken, want)
	}
	return token{id: id, secret: secret}, nil
}
