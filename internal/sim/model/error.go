package model

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
)

// Error is an error the emulated PVE reports to its client: HTTP status,
// message, optional per-parameter errors. Messages keep PVE's trailing
// newline where PVE's die() has one (behaviour.md §0); the HTTP layer
// strips nothing, so clients see the bytes a real server sends.
type Error struct {
	Status  int
	Message string
	Params  map[string]string
}

func (e *Error) Error() string {
	msg := strings.TrimRight(e.Message, "\n")
	if len(e.Params) == 0 {
		return msg
	}
	var b strings.Builder
	b.WriteString(msg)
	for _, k := range slices.Sorted(maps.Keys(e.Params)) {
		fmt.Fprintf(&b, " %s: %s;", k, strings.TrimRight(e.Params[k], "\n"))
	}
	return strings.TrimSuffix(b.String(), ";")
}

// PermError is PVE's raise_perm_exc: 403 "Permission check failed (what)\n",
// or "Permission check failed\n" when what is empty.
func PermError(what string) *Error {
	if what == "" {
		return &Error{Status: http.StatusForbidden, Message: "Permission check failed\n"}
	}
	return &Error{Status: http.StatusForbidden, Message: "Permission check failed (" + what + ")\n"}
}

// ParamError is PVE's raise_param_exc: 400 "Parameter verification failed.\n"
// with the per-parameter messages.
func ParamError(params map[string]string) *Error {
	return &Error{Status: http.StatusBadRequest, Message: "Parameter verification failed.\n", Params: params}
}

// Failf is a plain die(): HTTP 500 with the message as formatted. Callers
// include the trailing "\n" exactly where PVE's source has one.
func Failf(format string, args ...any) *Error {
	return &Error{Status: http.StatusInternalServerError, Message: fmt.Sprintf(format, args...)}
}

// TaskMessage is how an error appears as a task's exitstatus and in its
// "TASK ERROR:" line (RESTEnvironment fork_worker): the error's Perl text
// (PerlText), chomped, with its inner newlines made spaces. A 403 inside a
// worker so shows with its status prefix, as seed 004 §3.5 observed
// ("403 Permission check failed (/vms/101, VM.Backup)").
func TaskMessage(err error) string {
	msg := strings.TrimSuffix(PerlText(err), "\n")
	return strings.ReplaceAll(msg, "\n", " ")
}

// PerlText is the text of err where Perl interpolates it ("$err", e.g.
// die "unable to restore CT 101 - $err"): a PVE::Exception, which has an
// HTTP code, stringifies as "<code> <message>" followed by one
// "<param>: <message>" line per parameter error; a plain die (500) is its
// message. The result ends in a newline.
func PerlText(err error) string {
	e, ok := err.(*Error)
	if !ok {
		return strings.TrimSuffix(err.Error(), "\n") + "\n"
	}
	msg := e.Message
	if e.Status != http.StatusInternalServerError {
		msg = fmt.Sprintf("%d %s", e.Status, msg)
	}
	if !strings.HasSuffix(msg, "\n") {
		msg += "\n"
	}
	for _, k := range slices.Sorted(maps.Keys(e.Params)) {
		msg += k + ": " + strings.TrimSuffix(e.Params[k], "\n") + "\n"
	}
	return msg
}
