package schema

//go:generate go run ./gen

import (
	"bytes"
	"compress/gzip"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
)

// Versions are the PVE versions whose schema is embedded.
var Versions = []string{"9.1", "8.4"}

// SourceFiles names, per version, the API dump in shared/pve-api/ that
// the table is generated from.
var SourceFiles = map[string]string{
	"9.1": "apidoc.json",
	"8.4": "apidoc-pve8.json",
}

//go:embed tables
var tables embed.FS

// API is the schema of one PVE version. It is immutable once loaded and
// safe for concurrent use.
type API struct {
	Version string
	routes  []*Method
	root    *route
	privs   map[string]bool
}

var (
	loadMu sync.Mutex
	loaded = map[string]*API{}
)

// Load returns the schema of a PVE version ("9.1" or "8.4") from the
// embedded table. The result is cached: every call for a version returns
// the same *API.
func Load(version string) (*API, error) {
	loadMu.Lock()
	defer loadMu.Unlock()
	if a, ok := loaded[version]; ok {
		return a, nil
	}
	raw, err := tableJSON(version)
	if err != nil {
		return nil, err
	}
	a, err := build(raw)
	if err != nil {
		return nil, fmt.Errorf("load schema %s: %w", version, err)
	}
	if a.Version != version {
		return nil, fmt.Errorf("load schema %s: table says version %q", version, a.Version)
	}
	loaded[version] = a
	return a, nil
}

// tableJSON returns the decompressed embedded table of a version.
func tableJSON(version string) ([]byte, error) {
	gz, err := tables.ReadFile("tables/" + version + ".json.gz")
	if err != nil {
		return nil, fmt.Errorf("load schema %s: no embedded table (versions: %s): %w",
			version, strings.Join(Versions, ", "), err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return nil, fmt.Errorf("load schema %s: %w", version, err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("load schema %s: %w", version, err)
	}
	return raw, nil
}

func build(raw []byte) (*API, error) {
	var t table
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, err
	}
	a := &API{Version: t.Version, routes: t.Methods, root: &route{}, privs: map[string]bool{}}
	for _, p := range t.Privileges {
		a.privs[p] = true
	}
	for _, m := range t.Methods {
		m.link(a)
		if err := a.root.add(m); err != nil {
			return nil, err
		}
		if err := m.Parameters.compile(); err != nil {
			return nil, fmt.Errorf("%s %s: %w", m.HTTPMethod, m.Path, err)
		}
	}
	return a, nil
}

// Routes returns every method of the schema, sorted by path and HTTP
// method. Conformance tests walk it; callers must not modify the methods.
func (a *API) Routes() []*Method {
	return append([]*Method(nil), a.routes...)
}

// Privileges returns the privilege names this PVE version knows, sorted.
func (a *API) Privileges() []string {
	out := make([]string, 0, len(a.privs))
	for p := range a.privs {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// Lookup finds the method serving an HTTP method on a concrete path such
// as "/nodes/pve/lxc/101/config" (a leading "/api2/json" is ignored) and
// returns the values of the template's parameters, {node: pve, vmid: 101}.
// The path is the decoded one (r.URL.Path); empty segments are skipped as
// PVE does. Literal segments win over parameters. ok is false when no
// method matches; PVE answers that with 501 "Method 'GET /x' not
// implemented" whether the path or only the verb is unknown.
//
// Path parameters are parameters like any other: the caller merges them
// into the request's parameters before Validate, as PVE does.
func (a *API) Lookup(method, path string) (m *Method, pathParams map[string]string, ok bool) {
	path = strings.TrimPrefix(path, "/api2/json")
	var segs []string
	for _, s := range strings.Split(path, "/") {
		if s != "" {
			segs = append(segs, s)
		}
	}
	m = a.root.match(segs, strings.ToUpper(method))
	if m == nil {
		return nil, nil, false
	}
	pathParams = map[string]string{}
	for i, s := range templateSegments(m.Path) {
		name, isParam := strings.CutPrefix(s, "{")
		if !isParam {
			continue
		}
		name = strings.TrimSuffix(name, "}")
		if m.RestParam && i == len(templateSegments(m.Path))-1 {
			pathParams[name] = strings.Join(segs[i:], "/")
		} else {
			pathParams[name] = segs[i]
		}
	}
	return m, pathParams, true
}

// route is a node of the path tree.
type route struct {
	literal map[string]*route
	param   *route // child for "{name}" segments
	rest    *route // child for a last "{name}" that takes the rest
	methods map[string]*Method
}

func templateSegments(path string) []string {
	var segs []string
	for _, s := range strings.Split(path, "/") {
		if s != "" {
			segs = append(segs, s)
		}
	}
	return segs
}

func (r *route) add(m *Method) error {
	segs := templateSegments(m.Path)
	for i, s := range segs {
		switch {
		case m.RestParam && i == len(segs)-1:
			if !strings.HasPrefix(s, "{") {
				return fmt.Errorf("%s: rest segment %q is no parameter", m.Path, s)
			}
			if r.rest == nil {
				r.rest = &route{}
			}
			r = r.rest
		case strings.HasPrefix(s, "{"):
			if r.param == nil {
				r.param = &route{}
			}
			r = r.param
		default:
			if r.literal == nil {
				r.literal = map[string]*route{}
			}
			next := r.literal[s]
			if next == nil {
				next = &route{}
				r.literal[s] = next
			}
			r = next
		}
	}
	if r.methods == nil {
		r.methods = map[string]*Method{}
	}
	if r.methods[m.HTTPMethod] != nil {
		return fmt.Errorf("duplicate route %s %s", m.HTTPMethod, m.Path)
	}
	r.methods[m.HTTPMethod] = m
	return nil
}

func (r *route) match(segs []string, verb string) *Method {
	if len(segs) == 0 {
		return r.methods[verb]
	}
	if next := r.literal[segs[0]]; next != nil {
		if m := next.match(segs[1:], verb); m != nil {
			return m
		}
	}
	if r.param != nil {
		if m := r.param.match(segs[1:], verb); m != nil {
			return m
		}
	}
	if r.rest != nil {
		return r.rest.methods[verb]
	}
	return nil
}
