package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/bounded"
	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/sim/schema"
)

// request is one API call after authentication and validation.
type request struct {
	ctx    context.Context
	remote string // the client's host:port (http.Request.RemoteAddr)
	method string
	path   string            // concrete path below /api2/json
	params map[string]string // query/body parameters plus path parameters
	auth   model.Auth
	m      *schema.Method
}

// handler serves one route. It returns the value for "data" (and, for
// paged lists, a total), or an error (a *model.Error answers with the
// status of its kind, model.Kind.Code).
type handler func(r *request) (any, error)

// pagedResult lets a handler return {"data": …, "total": n}.
type pagedResult struct {
	data  any
	total int
}

// route registers h for a schema path template, e.g.
// s.route("GET", "/nodes/{node}/lxc", s.getLXCList). Every route must exist
// in the official schema: the conformance test walks this table.
func (s *Server) route(method, path string, h handler) {
	if s.routes == nil {
		s.routes = map[string]handler{}
	}
	s.routes[method+" "+path] = h
}

// Routes lists the "METHOD /path" templates the emulator serves.
func (s *Server) Routes() []string {
	out := make([]string, 0, len(s.routes))
	for k := range s.routes {
		out = append(out, k)
	}
	return out
}

// Handler is the emulator's HTTP handler: /api2/json/ for the PVE API and
// /_corral/ for test controls.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/api2/json/", s.serveAPI)
	mux.HandleFunc("/_corral/", s.serveAdmin)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, notImplemented(r.Method, r.URL.Path))
	})
	return mux
}

// serveAPI answers one /api2/json request: it counts it in the request
// log, applies the fault rules, then writes dispatch's answer.
func (s *Server) serveAPI(w http.ResponseWriter, req *http.Request) {
	start := time.Now()
	path := strings.TrimPrefix(req.URL.Path, "/api2/json")
	if path == "" {
		path = "/"
	}
	status := http.StatusOK

	// The log counts by schema template, also for injected faults; an
	// unknown path counts under one key, so the log stays bounded. The
	// count goes in before the answer, so a client that reads the log
	// right after its request sees it; time and errors follow.
	m, pathParams, ok := s.api.Lookup(req.Method, path)
	tmpl := "(unknown path)"
	if ok {
		tmpl = m.Path
	}
	s.reqlog.count(req.Method, tmpl)
	defer func() { s.reqlog.finish(req.Method, tmpl, status, time.Since(start)) }()

	if drop := s.faults.before(req.Method, path); drop != nil {
		status = drop.status
		if drop.drop {
			dropConnection(w)
			return
		}
		writeError(w, &httpError{status: drop.status, message: drop.message})
		return
	}

	var out any
	var err error
	if ok {
		out, err = s.dispatch(req, path, m, pathParams)
	} else {
		err = notImplemented(req.Method, path)
	}
	if err != nil {
		status = statusOf(err)
		writeError(w, err)
		return
	}
	writeData(w, out)
}

// dispatch answers a request for schema method m that the fault rules let
// through, in pveproxy's order: an offline node, a method without a
// handler, the parameters, the credentials (admit), the schema's
// validation, then the handler.
func (s *Server) dispatch(req *http.Request, path string, m *schema.Method, pathParams map[string]string) (any, error) {
	// A request for an offline node is proxied there by PVE and fails
	// with pveproxy's 595 (the connection cannot be made).
	if node := pathParams["node"]; node != "" && !s.cluster.NodeOnline(node) && s.cluster.NodeExists(node) {
		return nil, &httpError{status: 595, message: "Connection refused\n"}
	}

	h := s.routes[req.Method+" "+m.Path]
	if h == nil {
		return nil, notImplemented(req.Method, path)
	}
	params, err := readParams(req)
	if err != nil {
		return nil, &httpError{status: http.StatusBadRequest, message: err.Error() + "\n"}
	}
	r := &request{ctx: req.Context(), remote: req.RemoteAddr, method: req.Method, path: path, params: params, m: m}
	dupErr := mergePathParams(r.params, pathParams)
	if err := s.admit(req, r, dupErr); err != nil {
		return nil, err
	}
	if err := m.Validate(r.params); err != nil {
		var pe *schema.ParamError
		if errors.As(err, &pe) {
			err = model.ParamError(pe.Errors)
		}
		return nil, err
	}
	if req.Method == http.MethodGet && cachedReads[m.Path] {
		return s.cachedRead(req, r, h)
	}
	return h(r)
}

// admit authenticates r and checks its permissions. POST /access/ticket
// is the only route that needs no credentials. A path parameter repeated
// in the body (dupErr) fails after authentication and before the
// permission check, as in pveproxy.
func (s *Server) admit(req *http.Request, r *request, dupErr error) error {
	login := req.Method == http.MethodPost && r.m.Path == "/access/ticket"
	if !login {
		auth, err := s.authenticate(req)
		if err != nil {
			return err
		}
		r.auth = auth
	}
	if dupErr != nil {
		return dupErr
	}
	if login {
		return nil
	}
	return s.checkPermissions(r)
}

// notImplemented is pveproxy's answer for a method it has no handler for
// (PVE::HTTPServer rest_handler): 501, the message without a newline.
func notImplemented(method, path string) *httpError {
	return &httpError{status: http.StatusNotImplemented, message: fmt.Sprintf("Method '%s %s' not implemented", method, path)}
}

// mergePathParams adds the path's parameters to params as rest_handler
// does: a request parameter that names a path parameter with another
// value is a 400 (checked after authentication, before permissions).
func mergePathParams(params, pathParams map[string]string) error {
	var conflicts map[string]string
	for k, v := range pathParams {
		if old, ok := params[k]; ok && old != v {
			if conflicts == nil {
				conflicts = map[string]string{}
			}
			conflicts[k] = "duplicate parameter (already defined in URI) with conflicting values!"
		}
		params[k] = v
	}
	if conflicts != nil {
		return model.ParamError(conflicts)
	}
	return nil
}

// bodyLimits bound a request body before it is decoded (issue 27): a
// form body's parameters are bounded by net/url (10,000), a JSON body's
// by these; PVE's parameters are flat, a few hundred at most.
var bodyLimits = bounded.Limits{Size: 16 << 20, Depth: 32, Values: 10_000}

// readParams merges a form or JSON body with the query string, as
// pveproxy's extract_params does: a key in both takes the query's value.
// Values in JSON bodies are converted to PVE's string forms.
func readParams(req *http.Request) (map[string]string, error) {
	params := map[string]string{}
	defer func() {
		for k, vs := range req.URL.Query() {
			params[k] = strings.Join(vs, "\x00")
		}
	}()
	if req.Body == nil || req.Method == http.MethodGet {
		return params, nil
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, int64(bodyLimits.Size)+1))
	if err != nil {
		return nil, fmt.Errorf("unable to read request body: %w", err)
	}
	if len(body) == 0 {
		return params, nil
	}
	if len(body) > bodyLimits.Size {
		return nil, fmt.Errorf("request body is more than %d bytes, more than the emulator reads", bodyLimits.Size)
	}
	ct, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		if err := bounded.JSON(body, bodyLimits); err != nil {
			return nil, fmt.Errorf("unable to parse JSON body: %v, more than the emulator reads", err)
		}
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			return nil, fmt.Errorf("unable to parse JSON body: %v", err)
		}
		for k, v := range m {
			switch v := v.(type) {
			case string:
				params[k] = v
			case bool:
				params[k] = map[bool]string{true: "1", false: "0"}[v]
			case float64:
				params[k] = strconv.FormatFloat(v, 'f', -1, 64)
			case nil:
			default:
				b, _ := json.Marshal(v)
				params[k] = string(b)
			}
		}
	default:
		vals, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, fmt.Errorf("unable to parse form body: %v", err)
		}
		for k, vs := range vals {
			params[k] = strings.Join(vs, "\x00")
		}
	}
	return params, nil
}

// dropConnection closes the TCP connection without a response (fault
// injection), or answers 599-like garbage when the connection cannot be
// hijacked (in-process mode).
func dropConnection(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// intParam parses an integer parameter that schema validation has checked.
func intParam(r *request, name string) int {
	n, _ := strconv.Atoi(r.params[name])
	return n
}

func boolParam(r *request, name string) bool {
	switch strings.ToLower(r.params[name]) {
	case "1", "yes", "on", "true":
		return true
	}
	return false
}
