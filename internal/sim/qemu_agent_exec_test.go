package sim

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/testenv"
)

// execStatusUntilExited polls agent/exec-status for pid until the
// command exited and returns that answer, as PVE returns it.
func execStatusUntilExited(t *testing.T, k *e2e, vmid, pid string) map[string]any {
	t.Helper()
	var st map[string]any
	testenv.WaitFor(t, "the command to exit", func() bool {
		st = nil
		k.ok(k.root(), http.MethodGet, "/nodes/pve/qemu/"+vmid+"/agent/exec-status", url.Values{"pid": {pid}}, &st)
		return st["exited"] == float64(1)
	})
	return st
}

// execPID posts agent/exec and returns the pid it answers.
func execPID(t *testing.T, k *e2e, vmid string, params url.Values) string {
	t.Helper()
	var res map[string]any
	k.ok(k.root(), http.MethodPost, "/nodes/pve/qemu/"+vmid+"/agent/exec", params, &res)
	pid, ok := res["pid"].(float64)
	if !ok || len(res) != 1 {
		t.Fatalf("exec answered %v, want {pid}", res)
	}
	return strconv.Itoa(int(pid))
}

// TestQemuAgent_exec: through the API, a view VM's agent runs a
// command (array form and single-value form), feeds it input-data, and
// exec-status answers exited 0 until it ends, then its exit code and
// decoded output (no out-data without output), once: the next
// exec-status of that pid is the agent's invalid parameter.
func TestQemuAgent_exec(t *testing.T) {
	t.Setenv("CORRAL_SIM_RUNTIME", "view")
	t.Setenv("CORRAL_SIM_UNISOLATED", "1")
	k := newE2E(t)
	testenv.NeedGuestExec(t, k.srv.Guests().ExecUnavailable())
	root := k.root()
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", vmParams("310"))
	k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/310/status/start", nil)

	pid := execPID(t, k, "310", url.Values{"command": {"sh", "-c", "read l; echo got $l; echo warn >&2; exit 7"}, "input-data": {"line"}})
	st := execStatusUntilExited(t, k, "310", pid)
	want := map[string]any{"exited": float64(1), "exitcode": float64(7), "out-data": "got line\n", "err-data": "warn\n"}
	if !equalJSON(st, want) {
		t.Fatalf("exec-status %v, want %v", st, want)
	}
	if r := k.do(root, http.MethodGet, "/nodes/pve/qemu/310/agent/exec-status", url.Values{"pid": {pid}}); r.status != 500 || r.msg != "Agent error: Invalid parameter 'pid'\n" {
		t.Fatalf("a reported pid again: %d %q", r.status, r.msg)
	}
	// The single-value form: the program alone.
	st = execStatusUntilExited(t, k, "310", execPID(t, k, "310", url.Values{"command": {"true"}}))
	if want := map[string]any{"exited": float64(1), "exitcode": float64(0)}; !equalJSON(st, want) {
		t.Fatalf("true: exec-status %v, want %v", st, want)
	}
	if r := k.do(root, http.MethodPost, "/nodes/pve/qemu/310/agent/exec", url.Values{"command": {"no-such-program", "x"}}); r.status != 500 ||
		r.msg != "Agent error: Guest agent command failed, error was 'Failed to execute child process “no-such-program” (No such file or directory)'\n" {
		t.Fatalf("a missing program: %d %q", r.status, r.msg)
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// TestQemuAgent_execErrors: exec and exec-status need
// VM.GuestAgent.Unrestricted on PVE 9 (VM.Monitor on PVE 8), then an
// agent configured, the VM running and an agent that answers, with
// PVE's messages.
func TestQemuAgent_execErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ version, priv, refusal string }{
		{"9.1", "VM.GuestAgent.Audit,VM.GuestAgent.FileRead,VM.GuestAgent.FileWrite,VM.GuestAgent.FileSystemMgmt", "VM.GuestAgent.Unrestricted"},
		{"8.4", "VM.Audit,VM.PowerMgmt", "VM.Monitor"},
	} {
		t.Run(tc.version, func(t *testing.T) {
			t.Parallel()
			k := openE2E(t, Options{Dir: t.TempDir(), Listener: ListenTLS, TimeScale: zeroScale(), Version: tc.version})
			root := k.root()
			_, who := k.newUserToken("agent@pve", "tok", false)
			k.ok(root, http.MethodPost, "/access/roles", url.Values{"roleid": {"AgentNoExec"}, "privs": {tc.priv}}, nil)
			k.ok(root, http.MethodPut, "/access/acl", url.Values{"path": {"/vms/320"}, "roles": {"AgentNoExec"}, "users": {"agent@pve"}}, nil)
			noAgent := vmParams("321")
			noAgent.Del("agent")
			k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", vmParams("320"))
			k.mustOK(root, http.MethodPost, "/nodes/pve/qemu", noAgent)
			exec := url.Values{"command": {"true"}}
			status := url.Values{"pid": {"1"}}
			for _, c := range []struct {
				name, method, path string
				who                e2eCaller
				params             url.Values
				msg                string
			}{
				{"exec privilege", http.MethodPost, "320/agent/exec", who, exec, "Permission check failed (/vms/320, " + tc.refusal + ")\n"},
				{"exec-status privilege", http.MethodGet, "320/agent/exec-status", who, status, "Permission check failed (/vms/320, " + tc.refusal + ")\n"},
				{"no agent configured", http.MethodPost, "321/agent/exec", root, exec, "No QEMU guest agent configured\n"},
				{"not running", http.MethodPost, "320/agent/exec", root, exec, "VM 320 is not running\n"},
				{"status not running", http.MethodGet, "320/agent/exec-status", root, status, "VM 320 is not running\n"},
			} {
				if r := k.do(c.who, c.method, "/nodes/pve/qemu/"+c.path, c.params); r.msg != c.msg {
					t.Errorf("%s: %d %q, want %q", c.name, r.status, r.msg, c.msg)
				}
			}
			// The state-only runtime: no agent answers. Installed here,
			// as the view runtime gives VMs an agent that answers.
			k.srv.Cluster().SetVMRuntime(nil)
			k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/320/status/start", nil)
			for _, c := range []struct {
				method, path string
				params       url.Values
			}{
				{http.MethodPost, "exec", exec}, {http.MethodGet, "exec-status", status},
			} {
				if r := k.do(root, c.method, "/nodes/pve/qemu/320/agent/"+c.path, c.params); r.status != 500 || r.msg != "QEMU guest agent is not running\n" {
					t.Errorf("%s on the state-only runtime: %d %q", c.path, r.status, r.msg)
				}
			}
			// An answering agent without a guest: no program, no such pid.
			k.srv.Cluster().SetVMRuntime(model.NewAgentVMRuntime())
			k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/320/status/stop", nil)
			k.mustOK(root, http.MethodPost, "/nodes/pve/qemu/320/status/start", nil)
			if r := k.do(root, http.MethodPost, "/nodes/pve/qemu/320/agent/exec", url.Values{"command": {"ls", "/"}}); r.msg != "Agent error: Guest agent command failed, error was 'Failed to execute child process “ls” (No such file or directory)'\n" {
				t.Errorf("exec without a guest: %d %q", r.status, r.msg)
			}
			if r := k.do(root, http.MethodGet, "/nodes/pve/qemu/320/agent/exec-status", status); r.msg != "Agent error: Invalid parameter 'pid'\n" {
				t.Errorf("exec-status of an unknown pid: %d %q", r.status, r.msg)
			}
			if r := k.do(root, http.MethodGet, "/nodes/pve/qemu/320/agent/exec-status", nil); r.status != 400 || r.errs["pid"] != "property is missing and it is not optional" {
				t.Errorf("exec-status without pid: %d %v", r.status, r.errs)
			}
		})
	}
}
