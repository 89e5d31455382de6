package model

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Error is an error the emulated PVE reports to its client: what kind of
// failure it is, message, optional per-parameter errors. Messages keep
// PVE's trailing newline where PVE's die() has one (behaviour.md §0); the
// HTTP layer strips nothing, so clients see the bytes a real server sends.
// The model says what went wrong; internal/sim decides how HTTP answers it
// (its status and reason phrase), so the model needs no net/http.
type Error struct {
	Kind    Kind
	Message string
	Params  map[string]string
}

// Kind is the domain kind of an Error: one per PVE exception the model
// raises. The zero Kind is ErrFail, a plain die(). A Kind is itself an
// error, so callers branch with errors.Is(err, model.ErrPerm).
type Kind int

const (
	// ErrFail is a plain die(): the operation failed (PVE answers 500).
	ErrFail Kind = iota
	// ErrParam is raise_param_exc: the request's parameters are wrong
	// (PVE answers 400 with the per-parameter messages).
	ErrParam
	// ErrPerm is raise_perm_exc: the caller lacks a privilege (403).
	ErrPerm
	// ErrAuth is an authentication failure: no, a forged or an expired
	// ticket or token, a wrong password (401).
	ErrAuth
)

// Code is the kind's PVE::Exception code, the number Perl prints before
// the message where it interpolates the exception (PerlText). It is also
// the HTTP status PVE answers with (pve-http-server: a PVE::Exception's
// code is the status, a plain die is a 500): internal/sim answers a
// model error with it, so the two cannot drift apart.
func (k Kind) Code() int {
	switch k {
	case ErrParam:
		return 400
	case ErrPerm:
		return 403
	case ErrAuth:
		return 401
	}
	return 500
}

func (k Kind) Error() string {
	switch k {
	case ErrParam:
		return "parameter verification failed"
	case ErrPerm:
		return "permission check failed"
	case ErrAuth:
		return "authentication failure"
	}
	return "operation failed"
}

// Is makes errors.Is(err, kind) true for an *Error of that kind.
func (e *Error) Is(target error) bool {
	k, ok := target.(Kind)
	return ok && e.Kind == k
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
		return &Error{Kind: ErrPerm, Message: "Permission check failed\n"}
	}
	return &Error{Kind: ErrPerm, Message: "Permission check failed (" + what + ")\n"}
}

// ParamError is PVE's raise_param_exc: 400 "Parameter verification failed.\n"
// with the per-parameter messages.
func ParamError(params map[string]string) *Error {
	return &Error{Kind: ErrParam, Message: "Parameter verification failed.\n", Params: params}
}

// Failf is a plain die() (ErrFail) with the message as formatted. Callers
// include the trailing "\n" exactly where PVE's source has one.
func Failf(format string, args ...any) *Error {
	return &Error{Kind: ErrFail, Message: fmt.Sprintf(format, args...)}
}

// TaskMessage is how an error appears as a task's exitstatus and in its
// "TASK ERROR:" line (RESTEnvironment fork_worker): the error's Perl text
// (PerlText), chomped, with its inner newlines made spaces. An ErrPerm inside a
// worker so shows with its status prefix, as seed 004 §3.5 observed
// ("403 Permission check failed (/vms/101, VM.Backup)").
func TaskMessage(err error) string {
	msg := strings.TrimSuffix(PerlText(err), "\n")
	return strings.ReplaceAll(msg, "\n", " ")
}

// PerlText is the text of err where Perl interpolates it ("$err", e.g.
// die "unable to restore CT 101 - $err"): a PVE::Exception, which has a
// code (Kind.Code), stringifies as "<code> <message>" followed by one
// "<param>: <message>" line per parameter error; a plain die (ErrFail) is its
// message. The result ends in a newline.
func PerlText(err error) string {
	e, ok := err.(*Error)
	if !ok {
		return strings.TrimSuffix(err.Error(), "\n") + "\n"
	}
	msg := e.Message
	if e.Kind != ErrFail {
		msg = fmt.Sprintf("%d %s", e.Kind.Code(), msg)
	}
	if !strings.HasSuffix(msg, "\n") {
		msg += "\n"
	}
	for _, k := range slices.Sorted(maps.Keys(e.Params)) {
		msg += k + ": " + strings.TrimSuffix(e.Params[k], "\n") + "\n"
	}
	return msg
}
