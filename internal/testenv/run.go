package testenv

import (
	"bytes"
	"os/exec"
	"testing"
)

// Run runs cmd and returns its exit code and what it wrote to stdout and
// stderr (unless cmd already sends them elsewhere). A command that cannot
// start, or ends without an exit code, fails the test.
func Run(t testing.TB, cmd *exec.Cmd) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	if cmd.Stdout == nil {
		cmd.Stdout = &out
	}
	if cmd.Stderr == nil {
		cmd.Stderr = &errb
	}
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}
