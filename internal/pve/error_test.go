package pve_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/pve"
)

// classes is which Is* helpers say yes.
type classes struct {
	NotFound, Locked, Permission, AlreadyExists, Unauthorized, Modified bool
	AlreadyRunning, SnapshotUnsupported, StartFailed                    bool
	NotRunning                                                          bool
}

func classOf(err error) classes {
	return classes{
		NotFound:      pve.IsNotFound(err),
		Locked:        pve.IsLocked(err),
		Permission:    pve.IsPermission(err),
		AlreadyExists: pve.IsAlreadyExists(err),
		Unauthorized:  errors.Is(err, pve.ErrUnauthorized),
		Modified:      pve.IsModified(err),

		AlreadyRunning:      errors.Is(err, pve.ErrAlreadyRunning),
		NotRunning:          errors.Is(err, pve.ErrNotRunning),
		SnapshotUnsupported: errors.Is(err, pve.ErrSnapshotUnsupported),
		StartFailed:         errors.Is(err, pve.ErrStartFailed),
	}
}

func TestAPIError_fixtures(t *testing.T) {
	tests := []struct {
		fixture string
		want    pve.APIError
		class   classes
		text    string
	}{
		{
			fixture: "error-500-no-such-ct.json",
			want:    pve.APIError{Method: "GET", Path: "/nodes/pve/lxc/4242/config", Status: 500, Message: "Configuration file 'nodes/pve/lxc/4242.conf' does not exist"},
			class:   classes{NotFound: true},
			text:    "GET /nodes/pve/lxc/4242/config: 500 Configuration file 'nodes/pve/lxc/4242.conf' does not exist",
		},
		{
			fixture: "error-500-locked.json",
			want:    pve.APIError{Method: "GET", Path: "/nodes/pve/lxc/4242/config", Status: 500, Message: "CT is locked (backup)"},
			class:   classes{Locked: true},
			text:    "GET /nodes/pve/lxc/4242/config: 500 CT is locked (backup)",
		},
		{
			fixture: "error-500-protection.json",
			want:    pve.APIError{Method: "GET", Path: "/nodes/pve/lxc/4242/config", Status: 500, Message: "can't remove CT 900 - protection mode enabled"},
			text:    "GET /nodes/pve/lxc/4242/config: 500 can't remove CT 900 - protection mode enabled",
		},
		{
			fixture: "error-403-perm-path.json",
			want:    pve.APIError{Method: "GET", Path: "/nodes/pve/lxc/4242/config", Status: 403, Message: "Permission check failed (/vms/101, VM.Allocate)"},
			class:   classes{Permission: true},
			text:    "GET /nodes/pve/lxc/4242/config: 403 Permission check failed (/vms/101, VM.Allocate)",
		},
		{
			fixture: "error-403-perm-bindmount.json",
			want:    pve.APIError{Method: "GET", Path: "/nodes/pve/lxc/4242/config", Status: 403, Message: "Permission check failed (mount point type bind is only allowed for root@pam)"},
			class:   classes{Permission: true},
			text:    "GET /nodes/pve/lxc/4242/config: 403 Permission check failed (mount point type bind is only allowed for root@pam)",
		},
		{
			fixture: "error-400-param.json",
			want: pve.APIError{Method: "GET", Path: "/nodes/pve/lxc/4242/config", Status: 400, Message: "Parameter verification failed.",
				Params: map[string]string{"mp0": "invalid format - format error\nmp0.mp: property is missing and it is not optional"}},
			text: "GET /nodes/pve/lxc/4242/config: 400 Parameter verification failed. (mp0: invalid format - format error; mp0.mp: property is missing and it is not optional)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.fixture, func(t *testing.T) {
			f := loadErrorFixture(t, tt.fixture)
			c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f.serve(t, w) }))
			_, err := c.ContainerConfig(ctx(t), "pve", 4242, false)
			var got *pve.APIError
			if !errors.As(err, &got) {
				t.Fatalf("err = %v (%T), want *APIError", err, err)
			}
			if diff := cmp.Diff(&tt.want, got); diff != "" {
				t.Errorf("APIError (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.class, classOf(err)); diff != "" {
				t.Errorf("classes (-want +got):\n%s", diff)
			}
			if got, want := got.Error(), tt.text; got != want {
				t.Errorf("Error()=%q, want %q", got, want)
			}
			if !strings.HasPrefix(err.Error(), "ct 4242 config: ") {
				t.Errorf("wrapped error %q lacks the operation prefix", err)
			}
		})
	}
}

func TestAPIError_classify(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		message string
		params  map[string]string
		class   classes
	}{
		{"ct exists", 500, "CT 105 already exists on node 'pve'", nil, classes{AlreadyExists: true}},
		{"vm exists", 500, "VM 105 already exists on node 'pve'", nil, classes{AlreadyExists: true}},
		{"ct exists at the config's write", 500, "unable to create CT 105 - CT 105 already exists on node 'pve'", nil, classes{AlreadyExists: true}},
		{"target volume exists", 500, "target volume 'vm-900-disk-3' already exists", nil, classes{AlreadyExists: true}},
		{"vm locked", 500, "VM is locked (snapshot)", nil, classes{Locked: true}},
		{"flock timeout", 500, "can't lock file '/run/lock/lxc/pve-config-101.lock' - got timeout", nil, classes{Locked: true}},
		{"no such volume", 500, "no such volume 'local-lvm:vm-1-disk-9'", nil, classes{NotFound: true}},
		{"no such storage", 500, "storage 'nope' does not exist", nil, classes{NotFound: true}},
		{"mp key missing", 500, "volume 'mp3' for container '101' does not exist", nil, classes{NotFound: true}},
		{"http 404", 404, "Not Found", nil, classes{NotFound: true}},
		{"unauthorized", 401, "authentication failure", nil, classes{Unauthorized: true}},
		{"already running is not exists", 500, "CT 105 already running", nil, classes{AlreadyRunning: true}},
		{"vm already running", 500, "VM 105 already running", nil, classes{AlreadyRunning: true}},
		{"ct not running", 500, "CT 105 not running", nil, classes{NotRunning: true}},
		{"vm not running (reboot)", 500, "VM 105 not running", nil, classes{NotRunning: true}},
		{"agent not running is no class", 500, "QEMU guest agent is not running", nil, classes{}},
		{"snapshot unsupported", 500, "snapshot feature is not available", nil, classes{SnapshotUnsupported: true}},
		{"digest mismatch", 500, "detected modified configuration - file changed by other user? Try again.", nil, classes{Modified: true}},
		{"digest mismatch of a named ct", 500, "Container 101: detected modified configuration - file changed by other user? Try again.", nil, classes{Modified: true}},
		{"generic 500", 500, "unable to create CT 105 - out of space", nil, classes{}},
		{"param error", 400, "Parameter verification failed.", map[string]string{"vmid": "value must have a minimum value of 100"}, classes{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				writeError(t, w, tt.status, tt.message, tt.params)
			}))
			err := c.Post(ctx(t), "/nodes/pve/lxc", nil, nil)
			var ae *pve.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("err = %v, want *APIError", err)
			}
			if got, want := ae.Message, tt.message; got != want {
				t.Errorf("Message=%q, want %q", got, want)
			}
			if diff := cmp.Diff(tt.class, classOf(err)); diff != "" {
				t.Errorf("classes (-want +got):\n%s", diff)
			}
		})
	}
}

// A 401 from a proxy or PVE without a JSON body still yields a message:
// the reason phrase.
func TestAPIError_reasonPhraseWithoutBody(t *testing.T) {
	c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeStatus(t, w, 401, "No ticket", nil)
	}))
	err := c.Get(ctx(t), "/version", nil, nil)
	var ae *pve.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v, want *APIError", err)
	}
	if got, want := ae.Message, "No ticket"; got != want {
		t.Errorf("Message=%q, want %q", got, want)
	}
	if !errors.Is(err, pve.ErrUnauthorized) {
		t.Errorf("errors.Is(err, ErrUnauthorized) = false for %v", err)
	}
}

func TestAPIError_Hint(t *testing.T) {
	tests := []struct {
		name string
		err  pve.APIError
		want []string // substrings; nil means no hint
	}{
		{"path privilege", pve.APIError{Status: 403, Message: "Permission check failed (/vms/101, VM.Allocate)"},
			[]string{"VM.Allocate on /vms/101", "pveum acl modify /vms/101"}},
		{"root only", pve.APIError{Status: 403, Message: "Permission check failed (mount point type bind is only allowed for root@pam)"},
			[]string{"root@pam", "no API token"}},
		{"not a permission error", pve.APIError{Status: 500, Message: "CT is locked (backup)"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.err.Hint()
			if tt.want == nil && got != "" {
				t.Errorf("Hint()=%q, want none", got)
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("Hint()=%q, want it to contain %q", got, w)
				}
			}
		})
	}
}

func TestTaskError(t *testing.T) {
	tests := []struct {
		name  string
		err   *pve.TaskError
		text  string
		class classes
	}{
		{"locked", &pve.TaskError{UPID: "UPID:pve:0003A2F0:0151D001:69F479DC:vzstart:102:ctl@pve!ctl:", ExitStatus: "CT is locked (backup)"},
			"task vzstart 102: CT is locked (backup)", classes{Locked: true}},
		{"no id", &pve.TaskError{UPID: "UPID:pve:0003A2F0:0151D001:69F479DC:vzdump::ctl@pve!ctl:", ExitStatus: "job errors"},
			"task vzdump: job errors", classes{}},
		{"permission", &pve.TaskError{UPID: "UPID:pve:0003A2F0:0151D001:69F479DC:vzdump::ctl@pve!ctl:", ExitStatus: "Permission check failed (/vms/101, VM.Backup)"},
			"task vzdump: Permission check failed (/vms/101, VM.Backup)", classes{Permission: true}},
		{"permission after 403", &pve.TaskError{UPID: "UPID:pve:0003A2F0:0151D001:69F479DC:vzdump::ctl@pve!ctl:", ExitStatus: "403 Permission check failed (/vms/101, VM.Backup)"},
			"task vzdump: 403 Permission check failed (/vms/101, VM.Backup)", classes{Permission: true}},
		{"permission inside a longer status", &pve.TaskError{UPID: "UPID:pve:0003A2F0:0151D001:69F479DC:vzdump::ctl@pve!ctl:", ExitStatus: "backup of ct 101 failed: Permission check failed (/storage/local, Datastore.AllocateSpace)"},
			"task vzdump: backup of ct 101 failed: Permission check failed (/storage/local, Datastore.AllocateSpace)", classes{Permission: true}},
		{"start failed", &pve.TaskError{UPID: "UPID:pve:0003A2F0:0151D001:69F479DC:vzstart:102:ctl@pve!ctl:", ExitStatus: "startup for container '102' failed"},
			"task vzstart 102: startup for container '102' failed", classes{StartFailed: true}},
		{"snapshot unsupported", &pve.TaskError{UPID: "UPID:pve:0003A2F0:0151D001:69F479DC:vzsnapshot:102:ctl@pve!ctl:", ExitStatus: "snapshot feature is not available"},
			"task vzsnapshot 102: snapshot feature is not available", classes{SnapshotUnsupported: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.text {
				t.Errorf("Error()=%q, want %q", got, tt.text)
			}
			if diff := cmp.Diff(tt.class, classOf(tt.err)); diff != "" {
				t.Errorf("classes (-want +got):\n%s", diff)
			}
		})
	}
}
