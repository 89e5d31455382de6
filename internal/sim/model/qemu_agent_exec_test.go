package model

import (
	"encoding/json"
	"testing"

	"github.com/corralhq/corral/internal/testenv"
)

// TestAgentVMRuntime_exec: a guest-exec command is "not exited" while
// its guest runs it, then reported exited once with its status and
// forgotten; a stopped VM's commands go with it; without a runner no
// program exists.
func TestAgentVMRuntime_exec(t *testing.T) {
	t.Parallel()
	rt := NewAgentVMRuntime()
	if _, err := rt.Start(VMStartSpec{VMID: 100, Agent: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.Exec(100, GuestExec{Path: "ls"}); err == nil || err.Error() != "Agent error: Guest agent command failed, error was 'Failed to execute child process “ls” (No such file or directory)'" {
		t.Fatalf("no runner: %v", err)
	}
	release := make(chan struct{})
	code := 2
	var got GuestExec
	rt.RunExecWith(func(vmid int, req GuestExec) (int, func() GuestExecStatus, error) {
		got = req
		return 77, func() GuestExecStatus { <-release; return GuestExecStatus{ExitCode: &code, Out: []byte("x")} }, nil
	})
	req := GuestExec{Path: "cat", Args: []string{"-"}, Input: []byte("in"), HasInput: true}
	pid, err := rt.Exec(100, req)
	if err != nil || pid != 77 || got.Path != "cat" || string(got.Input) != "in" {
		t.Fatalf("exec: %d %v, runner got %+v", pid, err, got)
	}
	if st, err := rt.ExecStatus(100, 77); err != nil || st.Exited {
		t.Fatalf("running: %+v %v", st, err)
	}
	close(release)
	var st GuestExecStatus
	testenv.WaitFor(t, "the command's exit to be recorded", func() bool {
		if st, err = rt.ExecStatus(100, 77); err != nil {
			t.Fatal(err)
		}
		return st.Exited
	})
	if b, _ := json.Marshal(st.answer()); string(b) != `{"exitcode":2,"exited":1,"out-data":"x"}` {
		t.Fatalf("answer %s", b)
	}
	if _, err := rt.ExecStatus(100, 77); err == nil || err.Error() != "Agent error: Invalid parameter 'pid'" {
		t.Fatalf("reported twice: %v", err)
	}
	if _, err := rt.Exec(100, req); err != nil {
		t.Fatal(err)
	}
	rt.Stop(100)
	rt.Start(VMStartSpec{VMID: 100, Agent: true})
	if _, err := rt.ExecStatus(100, 77); err == nil || err.Error() != "Agent error: Invalid parameter 'pid'" {
		t.Fatalf("a command of the stopped guest: %v", err)
	}
	rt.Mute(100, true)
	if _, err := rt.Exec(100, req); err == nil || err.Error() != "QEMU guest agent is not running" {
		t.Fatalf("muted: %v", err)
	}
}

// TestQGAExecArgs: guest-exec's arguments as qemu_exec sends them.
func TestQGAExecArgs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		req  GuestExec
		want string
	}{
		{GuestExec{Path: "ls"}, `{"arg":[],"capture-output":true,"path":"ls"}`},
		{GuestExec{Path: "cat", Args: []string{"-n"}, Input: []byte("hi\n"), HasInput: true}, `{"arg":["-n"],"capture-output":true,"input-data":"aGkK","path":"cat"}`},
		{GuestExec{Path: "cat", HasInput: true}, `{"arg":[],"capture-output":true,"input-data":"","path":"cat"}`},
	} {
		if b, _ := json.Marshal(QGAExecArgs(tc.req)); string(b) != tc.want {
			t.Errorf("%+v: %s, want %s", tc.req, b, tc.want)
		}
	}
}
