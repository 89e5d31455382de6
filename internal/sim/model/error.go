package model

import (
	"fmt"
	"net/http"
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
	for _, k := range sortedKeys(e.Params) {
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
// "TASK ERROR:" line: the message without its trailing newline. A 403 inside
// a worker shows with its status prefix, as seed 004 §3.5 observed
// ("403 Permission check failed (/vms/101, VM.Backup)").
func TaskMessage(err error) string {
	if e, ok := err.(*Error); ok {
		msg := strings.TrimRight(e.Message, "\n")
		if e.Status == http.StatusForbidden {
			return "403 " + msg
		}
		if len(e.Params) > 0 {
			return strings.TrimRight(e.Error(), "\n")
		}
		return msg
	}
	return strings.TrimRight(err.Error(), "\n")
}
