// Package hostcheck guards corral's HTTP servers against DNS rebinding:
// a web page the operator opens can point its own name at 127.0.0.1 (or
// another address the operator's browser reaches) and then read what a
// server there answers, since to the browser it is the page's own
// origin. The request still carries the page's name in its Host header,
// so a server that answers only its own names is safe from it.
//
// It is a leaf: it imports nothing of corral's, so the agent, the
// emulator and its apt proxy share it without joining their imports.
package hostcheck

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Allow is the set of Host names a server answers to. The port of a
// Host is not compared: a port forward (ssh -L 8000:127.0.0.1:9120)
// changes it, and a rebinding page is told by its name. An IP address
// is always accepted (no page can rebind an address; NAT and the
// emulator's bridge forward change it), and so is an empty Host (an
// HTTP/1.0 client; browsers always send one).
type Allow struct {
	names []string // lower case, no trailing dot, no port
	flag  string   // the flag that adds a name, for the refusal's text
}

// ForListen is the allow-list of a server listening on listen (host:port
// as given, e.g. "127.0.0.1:9120", "localhost:9120", ":8006"): the
// listen host when it is a name, localhost, the machine's hostname when
// the address is not only the loopback, and extra (names the user added
// with flag, each a name or name:port; a port is ignored).
func ForListen(listen string, extra []string, flag string) *Allow {
	a := &Allow{flag: flag}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		host = listen
	}
	a.add("localhost")
	if net.ParseIP(host) == nil && host != "" {
		a.add(host)
	}
	if !isLoopback(host) {
		if h, err := os.Hostname(); err == nil {
			a.add(h)
		}
	}
	for _, e := range extra {
		a.add(e)
	}
	return a
}

// CheckNames refuses a name given with flag that no Host header could
// carry (a URL, a path, an empty name): it would be accepted by nothing
// and leave the user wondering why the server still refuses.
func CheckNames(flag string, names []string) error {
	for _, n := range names {
		if !validName(n) {
			return fmt.Errorf("%s %q: want a host name as a browser sends it, e.g. status.example or status.example:8443 (no scheme, path or spaces)", flag, n)
		}
	}
	return nil
}

// validName: a name or address, with an optional numeric port.
func validName(n string) bool {
	host := strings.TrimSpace(n)
	if h, port, err := net.SplitHostPort(host); err == nil {
		if _, err := strconv.ParseUint(port, 10, 16); err != nil {
			return false
		}
		host = h
	}
	h := normalize(host)
	if net.ParseIP(h) != nil {
		return true
	}
	return h != "" && !strings.ContainsFunc(h, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_')
	})
}

// Add accepts more names (e.g. the names of a server's certificate).
func (a *Allow) Add(names ...string) {
	for _, n := range names {
		a.add(n)
	}
}

func (a *Allow) add(name string) {
	n := normalize(name)
	if n != "" && !slices.Contains(a.names, n) {
		a.names = append(a.names, n)
	}
}

// Names are the accepted names, for messages and tests.
func (a *Allow) Names() []string { return slices.Clone(a.names) }

// Allowed reports whether a request's Host value is one of a's.
func (a *Allow) Allowed(host string) bool {
	n := normalize(host)
	if n == "" || net.ParseIP(n) != nil {
		return true
	}
	return slices.Contains(a.names, n)
}

// normalize is a Host value's name: its port and brackets dropped,
// lower case, without a trailing dot (example.com. is example.com).
func normalize(host string) string {
	h := strings.TrimSpace(host)
	if hh, _, err := net.SplitHostPort(h); err == nil {
		h = hh
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if i := strings.IndexByte(h, '%'); i >= 0 && net.ParseIP(h[:i]) != nil {
		h = h[:i] // an IPv6 zone
	}
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Handler answers a request whose Host is not allowed with 421
// Misdirected Request and says which names are accepted and how to add
// one; other requests go to next. With proxy set, a request in absolute
// form (GET http://host/…) and CONNECT pass: their Host names where a
// proxy is asked to go, and a browser never sends either to a page's
// own server.
func (a *Allow) Handler(next http.Handler, proxy bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if proxy && (r.Method == http.MethodConnect || r.URL.IsAbs()) {
			next.ServeHTTP(w, r)
			return
		}
		if !a.Allowed(r.Host) {
			http.Error(w, a.refusal(r.Host), http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (a *Allow) refusal(host string) string {
	msg := "Host " + strings.ToValidUTF8(host, "?") + " is not a name of this server (it answers " +
		strings.Join(a.names, ", ") + " and any IP address): a request under another name may come from a web page that pointed its name here (DNS rebinding)"
	if a.flag != "" {
		msg += "; to reach this server under that name, add it with " + a.flag + " " + normalize(host)
	}
	return msg
}
