package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// TestMain ends this package's binary through Exit, as every test
// package's TestMain does; started as testenv-self (TestSelfAs) it is
// that command instead.
func TestMain(m *testing.M) {
	if RunningAs("testenv-self") {
		os.Exit(selfMain(os.Args[1:]))
	}
	Exit(m.Run())
}

// TestExit: the binary's exit code is Exit's, 0 and not 0.
func TestExit(t *testing.T) {
	if code := os.Getenv("CORRAL_TESTENV_EXIT"); code != "" {
		Exit(map[string]int{"0": 0, "3": 3}[code])
	}
	for _, want := range []int{0, 3} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestExit$")
		cmd.Env = append(os.Environ(), "CORRAL_TESTENV_EXIT="+map[int]string{0: "0", 3: "3"}[want])
		got, _, _ := Run(t, cmd)
		if got != want {
			t.Errorf("Exit(%d): the process exited %d", want, got)
		}
	}
}
