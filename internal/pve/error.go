package pve

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/corralhq/corral/internal/lazyre"
)

// Sentinel errors. An *APIError or *TaskError matches one of the first
// nine with errors.Is when classify (below) puts it in that class, so
// callers branch with errors.Is(err, pve.ErrLocked) or the Is* helpers,
// never on the message text: every condition corral branches on is
// classified here, once.
var (
	ErrNotFound      = errors.New("not found")
	ErrLocked        = errors.New("locked")
	ErrPermission    = errors.New("permission denied")
	ErrAlreadyExists = errors.New("already exists")
	ErrUnauthorized  = errors.New("authentication failed")
	// ErrModified is PVE's answer to an update whose digest no longer
	// matches the config: someone else changed it since it was read.
	ErrModified = errors.New("modified concurrently")
	// ErrAlreadyRunning is a start refused because the guest runs
	// ("CT 105 already running"): the wanted state holds.
	ErrAlreadyRunning = errors.New("already running")
	// ErrNotRunning is a shutdown, stop or reboot refused because the
	// guest does not run ("CT 105 not running", before any task): the
	// wanted state of a shutdown holds.
	ErrNotRunning = errors.New("not running")
	// ErrSnapshotUnsupported is a snapshot PVE cannot take because a
	// volume is on a storage without snapshots (dir) or is a bind or
	// device mount ("snapshot feature is not available").
	ErrSnapshotUnsupported = errors.New("snapshot feature is not available")
	// ErrStartFailed is a start task that ended "startup for container
	// '<vmid>' failed": the container itself did not come up, and the
	// lines before "TASK ERROR:" in the task log say why.
	ErrStartFailed = errors.New("container startup failed")

	ErrInvalidToken = errors.New("invalid API token")
	ErrInvalidUPID  = errors.New("invalid UPID")
	ErrNoUPID       = errors.New("response carried no task id (UPID)")
	// ErrPlainHTTP is an http:// endpoint off the loopback, refused
	// because every request would carry the API token in clear text.
	ErrPlainHTTP = errors.New("plain http would send the API token in clear text to a host off this machine; use https (pin a self-signed certificate with --fingerprint), or pass --insecure-plain-http (env CORRAL_INSECURE_PLAIN_HTTP=1) if the network path is trusted")
)

// APIError is a request PVE answered with a non-2xx status. Message is
// PVE's message without its trailing newline; Params holds the per-
// parameter messages of a 400 "Parameter verification failed." (behaviour.md
// §0). Path is relative to /api2/json and carries no query string.
type APIError struct {
	Method  string
	Path    string
	Status  int
	Message string
	Params  map[string]string
}

// Error is one readable line: method, path, status, message, and the
// parameter errors sorted by name, their embedded newlines folded.
func (e *APIError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: %d %s", e.Method, e.Path, e.Status, oneLine(e.Message))
	if len(e.Params) > 0 {
		keys := make([]string, 0, len(e.Params))
		for k := range e.Params {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteString(" (")
		for i, k := range keys {
			if i > 0 {
				b.WriteString("; ")
			}
			fmt.Fprintf(&b, "%s: %s", k, oneLine(e.Params[k]))
		}
		b.WriteString(")")
	}
	return b.String()
}

// Is makes errors.Is(err, ErrNotFound) and friends work on an APIError.
func (e *APIError) Is(target error) bool {
	return target != nil && classify(e.Status, e.Message) == target
}

// Hint returns the fix for a permission error PVE explained, or "".
// "Permission check failed (/vms/101, VM.Allocate)" names the missing
// privilege and path; "… only allowed for root@pam" cannot be granted to
// any API token (behaviour.md §0 "root@pam vs API tokens").
func (e *APIError) Hint() string {
	if e.Status != http.StatusForbidden {
		return ""
	}
	if m := permPathRE.FindStringSubmatch(e.Message); m != nil {
		return fmt.Sprintf("the API token needs %s on %s; grant it as root on the host: pveum acl modify %s --tokens 'USER@REALM!TOKEN' --roles ROLE (a role that includes %s)", m[2], m[1], m[1], m[2])
	}
	if strings.Contains(e.Message, "only allowed for root@pam") {
		return "PVE allows this only to root@pam logged in with a password; no API token can do it, not even root's own"
	}
	return ""
}

// TaskError is a task that stopped with an exit status other than "OK" or
// "WARNINGS: n" (behaviour.md §0: errors inside the worker). Log is the
// tail of the task log, ending with PVE's "TASK ERROR: …" line.
type TaskError struct {
	UPID       string
	ExitStatus string
	Log        []string
}

// Error reads "task vzstart 102: CT is locked (backup)".
func (e *TaskError) Error() string {
	what := "task"
	if u, err := ParseUPID(e.UPID); err == nil {
		what = strings.TrimSpace("task " + u.Type + " " + u.ID)
	}
	return fmt.Sprintf("%s: %s", what, oneLine(e.ExitStatus))
}

// Is classifies the exit status like an API message, so a start task that
// died on "CT is locked (backup)" matches ErrLocked. A task's exit status
// that names a failed permission check anywhere ("…: Permission check
// failed (/vms/101, VM.Backup)", as vzdump reports it) is ErrPermission.
func (e *TaskError) Is(target error) bool {
	if target == nil {
		return false
	}
	if target == ErrPermission && strings.Contains(e.ExitStatus, "Permission check failed") {
		return true
	}
	return classify(0, e.ExitStatus) == target
}

// IsNotFound reports whether err says a guest, storage, volume or snapshot
// does not exist. PVE reports a missing CT as a 500 "Configuration file
// 'nodes/<node>/lxc/<vmid>.conf' does not exist" (fixtures/error-500-no-such-ct.json).
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// IsLocked reports whether err is a guest lock ("CT is locked (backup)",
// behaviour.md §h) or a config-file lock timeout. Both fail before anything
// changed, so repeating the step later is safe (see RetryLocked).
func IsLocked(err error) bool { return errors.Is(err, ErrLocked) }

// IsPermission reports whether PVE refused err's request for lack of a
// privilege (HTTP 403).
func IsPermission(err error) bool { return errors.Is(err, ErrPermission) }

// IsAlreadyExists reports whether err says the thing to create exists
// ("CT 105 already exists on node 'pve'", "target volume … already exists").
func IsAlreadyExists(err error) bool { return errors.Is(err, ErrAlreadyExists) }

// IsModified reports whether err says the config changed since the digest
// sent with the update was read ("detected modified configuration - file
// changed by other user? Try again."): nothing was written; read again.
func IsModified(err error) bool { return errors.Is(err, ErrModified) }

// The messages PVE uses for each class (behaviour.md §0, §d, §h). PVE
// answers most failures with 500, so the message decides.
var (
	notFoundRE = lazyre.New(`^Configuration file '[^']*' does not exist` +
		`|^storage '[^']*' does not exist` +
		`|^no such volume` +
		`|^volume '[^']*' (for container '[^']*' )?does not exist` +
		`|^snapshot '[^']*' does not exist`)
	lockedRE = lazyre.New(`^(CT|VM) is locked \(` +
		`|^can't lock file '[^']*' - got timeout`)
	modifiedRE = lazyre.New(`(^|: )detected modified configuration - file changed by other user\?`)
	// create_vm wraps create_and_lock_config's check, which a parallel
	// create of the same VMID fails between the handler's first check and
	// the config's write: "unable to create CT <vmid> - CT <vmid> already
	// exists on node '<node>'".
	existsRE  = lazyre.New(`^(unable to (create|restore) CT \d+ - )?(CT|VM) \d+ already exists on node|already exists$`)
	runningRE = lazyre.New(`already running`)
	// notRunningRE: pve-container's vm_shutdown, vm_stop and vm_reboot
	// check before their worker (sim model/lxc_power.go).
	notRunningRE = lazyre.New(`^(CT|VM) \d+ not running$`)
	// snapshotRE: pve-container's snapshot_create and vzdump's snapshot
	// mode (pve backup.go SnapshotContainer; sim model/snapshot.go).
	snapshotRE = lazyre.New(`snapshot feature is not available`)
	// startRE: pve-container LXC.pm vm_start's die (sim model/admission.go).
	startRE    = lazyre.New(`^startup for container `)
	permPathRE = lazyre.New(`^Permission check failed \((/[^,]*), ([^)]+)\)`)
)

// classify puts a status and message in one of the sentinel classes, or
// returns nil. status is 0 for task exit statuses.
func classify(status int, message string) error {
	msg := strings.TrimSpace(message)
	switch {
	case status == http.StatusUnauthorized:
		return ErrUnauthorized
	// A task that died on a permission check shows it as "403 Permission
	// check failed (…)" (seed 004 §3.5).
	case status == http.StatusForbidden, strings.HasPrefix(strings.TrimPrefix(msg, "403 "), "Permission check failed"):
		return ErrPermission
	case status == http.StatusNotFound, notFoundRE.MatchString(msg):
		return ErrNotFound
	case lockedRE.MatchString(msg):
		return ErrLocked
	case existsRE.MatchString(msg):
		return ErrAlreadyExists
	case modifiedRE.MatchString(msg):
		return ErrModified
	case runningRE.MatchString(msg):
		return ErrAlreadyRunning
	case notRunningRE.MatchString(msg):
		return ErrNotRunning
	case snapshotRE.MatchString(msg):
		return ErrSnapshotUnsupported
	case startRE.MatchString(msg):
		return ErrStartFailed
	}
	return nil
}

// oneLine folds PVE's multi-line messages ("invalid format - format
// error\nmp0.mp: property is missing…\n") into one line.
func oneLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return strings.ReplaceAll(s, "\n", "; ")
}
