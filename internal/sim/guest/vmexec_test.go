package guest_test

import (
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/testenv"
)

// TestViewVMs_exec: the view guest's agent runs guest-exec in the
// guest's filesystem: stdin is the input data, the output and exit code
// (or the killing signal) are reported once, when it exited, and then
// the PID is forgotten; a program not in the guest's PATH is refused
// as qemu-ga refuses it.
func TestViewVMs_exec(t *testing.T) {
	_, m, _ := startViewManager(t, "1")
	testenv.NeedGuestExec(t, m.ExecUnavailable())
	vms := m.ViewVMs()
	spec := model.VMStartSpec{VMID: 142, Agent: true, MAC: "BC:24:11:00:00:8E", UUID: "u142",
		CloudInit: &model.VMCloudInit{Hostname: "web", User: "admin", Nets: []model.VMCloudNet{{Name: "eth0", IP: "dhcp"}}}}
	if _, err := vms.Start(spec); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vms.Stop(142) })
	result := func(t *testing.T, req model.GuestExec) model.GuestExecStatus {
		t.Helper()
		pid, err := vms.Exec(142, req)
		if err != nil {
			t.Fatal(err)
		}
		var st model.GuestExecStatus
		testenv.WaitFor(t, "the command to exit", func() bool {
			if st, err = vms.ExecStatus(142, pid); err != nil {
				t.Fatal(err)
			}
			return st.Exited
		})
		if _, err := vms.ExecStatus(142, pid); err == nil || err.Error() != "Agent error: Invalid parameter 'pid'" {
			t.Fatalf("a second exec-status of an exited command: %v", err)
		}
		return st
	}
	for _, tc := range []struct {
		name     string
		req      model.GuestExec
		out, err string
		code     int // -1: killed by signal 9
	}{
		{"input and exit code", model.GuestExec{Path: "sh", Args: []string{"-c", "cat; echo oops >&2; exit 3"}, Input: []byte("hello\n"), HasInput: true}, "hello\n", "oops\n", 3},
		{"guest filesystem", model.GuestExec{Path: "/bin/sh", Args: []string{"-c", "echo it\\'s > /srv/f && cat /srv/f"}}, "it's\n", "", 0},
		{"no output", model.GuestExec{Path: "true"}, "", "", 0},
		{"signal", model.GuestExec{Path: "sh", Args: []string{"-c", "kill -9 $$"}}, "", "", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := result(t, tc.req)
			if string(st.Out) != tc.out || string(st.Err) != tc.err || st.OutTrunc || st.ErrTrunc {
				t.Fatalf("out %q err %q (truncated %v %v), want %q %q", st.Out, st.Err, st.OutTrunc, st.ErrTrunc, tc.out, tc.err)
			}
			switch {
			case tc.code < 0 && (st.Signal == nil || *st.Signal != 9 || st.ExitCode != nil):
				t.Fatalf("signal %v exit code %v, want signal 9", st.Signal, st.ExitCode)
			case tc.code >= 0 && (st.ExitCode == nil || *st.ExitCode != tc.code || st.Signal != nil):
				t.Fatalf("exit code %v signal %v, want %d", st.ExitCode, st.Signal, tc.code)
			}
		})
	}
	want := "Agent error: Guest agent command failed, error was 'Failed to execute child process “no-such-program” (No such file or directory)'"
	if _, err := vms.Exec(142, model.GuestExec{Path: "no-such-program"}); err == nil || err.Error() != want {
		t.Fatalf("a missing program: %v", err)
	}
	if !strings.Contains(strings.Join(vms.Calls(142), " "), "exec exec-status") {
		t.Fatalf("calls %v", vms.Calls(142))
	}
}
