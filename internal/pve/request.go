package pve

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/corralhq/corral/internal/bounded"
)

// maxBody bounds how much of a response is read. PVE's largest answers
// (a storage's content, a cluster's resources) are a few MiB; decoding
// 32 MiB holds it at most twice (the body, a value), under the 256 MiB a
// plan may use (issue 27).
const maxBody = 32 << 20

// answerLimits bound a PVE answer before encoding/json allocates for it
// (issue 27): PVE's answers nest fewer than ten levels, and a large
// cluster's /cluster/resources (3,000 guests of 20 fields) or a backup
// storage's content (10,000 volumes of 8) holds under 100,000 values.
// encoding/json grows a slice by half again each time, so 65,536 empty
// objects decoded into []ClusterResource (312 bytes each) take about
// 110 MiB (TestDecodeAnswer_bounded).
var answerLimits = bounded.Limits{Size: maxBody, Depth: 32, Values: 1 << 17}

// decodeAnswer checks raw against answerLimits and decodes the envelope
// and, in the same pass, its data into out (a pointer; nil decodes none
// of it); a non-2xx answer that fails either is still an APIError, from
// its status. One pass: decoding the envelope with its data as raw bytes
// first, then those into out, read every answer twice and copied its
// data (under -race, 3% of internal/apply's test CPU, issue 30). A data
// of null leaves out as it was.
func decodeAnswer(raw []byte, out any) (envelope, error) {
	env := envelope{Data: out}
	if out == nil {
		env.Data = new(skipData)
	}
	if err := bounded.JSON(raw, answerLimits); err != nil {
		return env, fmt.Errorf("the answer crosses a limit of what corral reads from Proxmox VE (%w): check that PROXMOX_VE_ENDPOINT names a Proxmox VE server", err)
	}
	return env, json.Unmarshal(raw, &env)
}

// skipData stands for an answer's data that nobody reads: the decoder
// steps over it without building it.
type skipData struct{}

func (*skipData) UnmarshalJSON([]byte) error { return nil }

// inData reports whether err, from decodeAnswer, is about the data
// rather than the answer as a whole (not JSON, past a limit, an envelope
// field of the wrong type). The decoder returns its own type errors as
// they are, naming the field's path from the top; an error of the data's
// own UnmarshalJSON is of some other type.
func inData(err error) bool {
	var se *json.SyntaxError
	var be *bounded.Error
	if errors.As(err, &se) || errors.As(err, &be) {
		return false
	}
	if te, ok := err.(*json.UnmarshalTypeError); ok { //nolint:errorlint // only the decoder's own, unwrapped
		return te.Field == "data" || strings.HasPrefix(te.Field, "data.")
	}
	return true
}

// Get calls GET path (relative to /api2/json, e.g. "/cluster/resources")
// with params in the query string and decodes the response's data into
// out (nil discards it). GETs are idempotent and are retried on 5xx
// answers and connection errors.
func (c *Client) Get(ctx context.Context, path string, params url.Values, out any) error {
	_, err := c.call(ctx, http.MethodGet, escapePath(path), params, out)
	return err
}

// Post calls POST path with params form-encoded in the body. It is never
// retried: a POST that failed in flight may have started a task.
func (c *Client) Post(ctx context.Context, path string, params url.Values, out any) error {
	_, err := c.call(ctx, http.MethodPost, escapePath(path), params, out)
	return err
}

// Put calls PUT path with params form-encoded in the body. Not retried.
func (c *Client) Put(ctx context.Context, path string, params url.Values, out any) error {
	_, err := c.call(ctx, http.MethodPut, escapePath(path), params, out)
	return err
}

// Delete calls DELETE path with params in the query string. Not retried.
func (c *Client) Delete(ctx context.Context, path string, params url.Values, out any) error {
	_, err := c.call(ctx, http.MethodDelete, escapePath(path), params, out)
	return err
}

// escapePath escapes a caller's unescaped path as a URL path.
func escapePath(p string) string { return (&url.URL{Path: p}).EscapedPath() }

// pathf builds an escaped API path: each string argument is one path
// segment, so a volid like "local:backup/vzdump-….tar.zst" keeps its slash
// as %2F.
func pathf(format string, args ...any) string {
	esc := make([]any, len(args))
	for i, a := range args {
		if s, ok := a.(string); ok {
			a = url.PathEscape(s)
		}
		esc[i] = a
	}
	return fmt.Sprintf(format, esc...)
}

// envelope is PVE's response body. Total is set by paged lists (task log).
// Data holds the caller's pointer, which the decoder fills (decodeAnswer).
type envelope struct {
	Data    any               `json:"data"`
	Message string            `json:"message"`
	Errors  map[string]string `json:"errors"`
	Total   *int              `json:"total"`
}

// call sends one API request (retrying GETs), decodes data into out, and
// returns the envelope's total (or -1 when absent).
func (c *Client) call(ctx context.Context, method, escPath string, params url.Values, out any) (int, error) {
	if method != http.MethodGet {
		if c.memo != nil {
			c.memo.wrote(escPath)
		}
		c.handOver.wrote()
	}
	p := RetryPolicy{Attempts: 1}
	if method == http.MethodGet {
		p = c.retry
	}
	var (
		total, tries int
		retryable    bool
		lastErr      error
	)
	p.Retryable = func(error) bool { return retryable }
	err := p.Do(ctx, func() (err error) {
		if tries > 0 {
			c.log.DebugContext(ctx, "retrying request", "method", method, "path", displayPath(escPath), "attempt", tries+1, "error", lastErr)
		}
		tries++
		total, retryable, err = c.once(ctx, method, escPath, params, out)
		lastErr = err
		return err
	})
	switch {
	case err == nil:
		return total, nil
	case err != lastErr: // ctx ended during a delay
		return -1, fmt.Errorf("%w (gave up retrying: %w)", lastErr, err)
	}
	return -1, err
}

// once sends one request. retryable says whether a GET may try again:
// connection errors and 5xx answers that are not a definite PVE verdict
// (a missing CT is a 500 too).
func (c *Client) once(ctx context.Context, method, escPath string, params url.Values, out any) (total int, retryable bool, err error) {
	u := *c.base
	u.Path = c.base.Path + mustUnescape(escPath)
	u.RawPath = c.base.Path + escPath
	var body io.Reader
	var form []byte
	switch method {
	case http.MethodGet, http.MethodDelete:
		u.RawQuery = params.Encode()
	default:
		form = []byte(params.Encode())
		body = bytes.NewReader(form)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return -1, false, fmt.Errorf("%s %s: %w", method, displayPath(escPath), err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("Authorization", c.auth)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.ua)

	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return -1, false, fmt.Errorf("%s %s: %w", method, displayPath(escPath), ctx.Err())
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		<-c.sem
		return -1, ctx.Err() == nil && !isCertError(err), c.transportError(method, escPath, err)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	resp.Body.Close()
	<-c.sem
	if err != nil {
		return -1, ctx.Err() == nil, fmt.Errorf("%s %s: read response: %w", method, displayPath(escPath), err)
	}

	ok := resp.StatusCode >= 200 && resp.StatusCode <= 299
	if !ok {
		out = nil // an error's data is not the answer's
	}
	env, jsonErr := decodeAnswer(raw, out)
	if !ok {
		apiErr := c.apiError(method, escPath, resp, env)
		retry := resp.StatusCode >= 500 && resp.StatusCode != http.StatusNotImplemented && classify(apiErr.Status, apiErr.Message) == nil
		return -1, retry, apiErr
	}
	if jsonErr != nil {
		what := "response"
		if inData(jsonErr) {
			what = "data"
		}
		return -1, false, fmt.Errorf("%s %s: decode %s: %w", method, displayPath(escPath), what, jsonErr)
	}
	total = -1
	if env.Total != nil {
		total = *env.Total
	}
	return total, false, nil
}

// apiError builds the typed error for a non-2xx answer. PVE repeats the
// message's first line as the reason phrase; when the body has no message
// (a proxy's 502, a 401) the reason phrase is used. The token secret is
// scrubbed in case a server ever echoes it.
func (c *Client) apiError(method, escPath string, resp *http.Response, env envelope) *APIError {
	msg := strings.TrimRight(env.Message, "\n")
	if msg == "" {
		msg = strings.TrimSpace(strings.TrimPrefix(resp.Status, fmt.Sprint(resp.StatusCode)))
	}
	e := &APIError{Method: method, Path: displayPath(escPath), Status: resp.StatusCode, Message: c.scrub(msg)}
	if len(env.Errors) > 0 {
		e.Params = make(map[string]string, len(env.Errors))
		for k, v := range env.Errors {
			e.Params[k] = c.scrub(strings.TrimRight(v, "\n"))
		}
	}
	return e
}

// transportError shortens net/http's error and explains certificate
// failures with the seen fingerprint (see CertError).
func (c *Client) transportError(method, escPath string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	where := fmt.Sprintf("%s %s://%s%s", method, c.base.Scheme, c.base.Host, c.base.Path+displayPath(escPath))
	var ce *CertError
	if errors.As(err, &ce) {
		return fmt.Errorf("%s: %w", where, ce)
	}
	var ve *tls.CertificateVerificationError
	if errors.As(err, &ve) && len(ve.UnverifiedCertificates) > 0 {
		return fmt.Errorf("%s: %w", where, &CertError{Fingerprint: fingerprintOf(ve.UnverifiedCertificates[0]), Err: ve})
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		// A bare "EOF" says nothing: PVE (or a proxy, or the network)
		// closed the connection before it answered.
		return fmt.Errorf("%s: the connection was closed before PVE answered (pveproxy restarting, a proxy, or the network): %w", where, err)
	}
	return fmt.Errorf("%s: %w", where, err)
}

func (c *Client) scrub(s string) string {
	if c.secret == "" {
		return s
	}
	return strings.ReplaceAll(s, c.secret, "REDACTED")
}

func isCertError(err error) bool {
	var ce *CertError
	var ve *tls.CertificateVerificationError
	return errors.As(err, &ce) || errors.As(err, &ve)
}

// displayPath is the unescaped path for messages and logs.
func displayPath(escPath string) string { return mustUnescape(escPath) }

func mustUnescape(escPath string) string {
	p, err := url.PathUnescape(escPath)
	if err != nil {
		return escPath
	}
	return p
}
