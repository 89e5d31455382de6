package sim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/sim/model"
)

// envelope is PVE's response body: {"data": …} on success, and
// {"data":null,"message":"…\n","errors":{…}} on failure
// (pve-http-server Formatter/Standard.pm).
type envelope struct {
	Data    any               `json:"data"`
	Message string            `json:"message,omitempty"`
	Errors  map[string]string `json:"errors,omitempty"`
	Total   *int              `json:"total,omitempty"`
}

// writeData writes a 200 envelope.
func writeData(w http.ResponseWriter, data any) {
	body, err := encodeData(data)
	if err != nil {
		writeError(w, &httpError{status: http.StatusInternalServerError, message: "internal error encoding response\n"})
		return
	}
	writeBody(w, http.StatusOK, body)
}

// encodeData is the body of a 200 envelope holding a handler's result:
// its data, and the total of a paged list; an encodedAnswer is the body
// already.
func encodeData(data any) ([]byte, error) {
	switch d := data.(type) {
	case encodedAnswer:
		return d, nil
	case model.ResourceList, model.CTStatusList:
		// A thousand containers' entries: encoded in one pass, without
		// encoding/json's second (compacting) pass over the result.
		list, _ := d.(json.Marshaler).MarshalJSON()
		return append(append([]byte(`{"data":`), list...), '}'), nil
	case pagedResult:
		return json.Marshal(envelope{Data: d.data, Total: &d.total})
	}
	return json.Marshal(envelope{Data: data})
}

// writeError writes err as PVE does: an *httpError with its status, a
// *model.Error with the status of its kind (Kind.Code), both with their
// message; anything else is a 500 with its text. The reason phrase is the
// first line of the message.
func writeError(w http.ResponseWriter, err error) {
	status, message, params := answerOf(err)
	reason := strings.SplitN(strings.TrimRight(message, "\n"), "\n", 2)[0]
	writeEnvelope(w, status, reason, envelope{Data: nil, Message: message, Errors: params})
}

// httpError is an answer only the HTTP side gives, with its status: a
// fault rule's, pveproxy's 595 for an offline node, 501 for a method
// without a handler, 404 for an unknown admin endpoint, 400 for a body
// that cannot be read. The model's failures are *model.Error.
type httpError struct {
	status  int
	message string
}

func (e *httpError) Error() string { return strings.TrimRight(e.message, "\n") }

// answerOf is the HTTP answer to err: status, message and per-parameter
// errors.
func answerOf(err error) (status int, message string, params map[string]string) {
	var he *httpError
	if errors.As(err, &he) {
		return he.status, he.message, nil
	}
	var me *model.Error
	if errors.As(err, &me) {
		return me.Kind.Code(), me.Message, me.Params
	}
	return http.StatusInternalServerError, err.Error() + "\n", nil
}

// statusOf is the HTTP status answering err.
func statusOf(err error) int {
	status, _, _ := answerOf(err)
	return status
}

// writeEnvelope encodes env with status and, where the connection allows,
// PVE's own reason phrase (net/http always writes the standard one, so the
// response is written raw on a hijacked HTTP/1.1 connection).
func writeEnvelope(w http.ResponseWriter, status int, reason string, env envelope) {
	body, err := json.Marshal(env)
	if err != nil {
		body = []byte(`{"data":null,"message":"internal error encoding response\n"}`)
		status = http.StatusInternalServerError
	}
	if reason != "" && reason != http.StatusText(status) {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, buf, err := hj.Hijack(); err == nil {
				defer conn.Close()
				writeRaw(buf.Writer, status, reason, body)
				buf.Flush()
				return
			}
		}
	}
	writeBody(w, status, body)
}

// writeBody writes an encoded envelope with PVE's headers.
func writeBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json;charset=UTF-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "max-age=0")
	h.Set("Pragma", "no-cache")
	w.WriteHeader(status)
	w.Write(body)
}

func writeRaw(bw *bufio.Writer, status int, reason string, body []byte) {
	reason = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, reason)
	fmt.Fprintf(bw, "HTTP/1.1 %d %s\r\n", status, reason)
	fmt.Fprintf(bw, "Content-Type: application/json;charset=UTF-8\r\nContent-Length: %d\r\nCache-Control: max-age=0\r\nPragma: no-cache\r\nConnection: close\r\n\r\n", len(body))
	bw.Write(body)
}

// handlerTransport is the no-listener mode: requests go straight to the
// handler through an in-memory response recorder.
type handlerTransport struct{ h http.Handler }

func (t *handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := &recorder{header: http.Header{}, status: http.StatusOK}
	t.h.ServeHTTP(rec, req)
	return &http.Response{
		Status:        fmt.Sprintf("%d %s", rec.status, http.StatusText(rec.status)),
		StatusCode:    rec.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        rec.header,
		Body:          &readCloser{bytes.NewReader(rec.body.Bytes())},
		ContentLength: int64(rec.body.Len()),
		Request:       req,
	}, nil
}

type recorder struct {
	header http.Header
	status int
	wrote  bool
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
}
func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(p)
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }
