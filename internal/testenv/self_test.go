package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// selfMain is the command testenv-self: "hello" prints a line; "race"
// makes a data race, which the race detector must report and exit 66 for
// even with the GORACE SelfAs sets.
func selfMain(args []string) int {
	switch strings.Join(args, " ") {
	case "hello":
		fmt.Println("testenv-self says hello")
		return 0
	case "race":
		n := 0
		done := make(chan bool)
		go func() { n++; done <- true }()
		n++
		<-done
		fmt.Println(n)
		return 0
	}
	return 2
}

// TestSelfAs: the link runs the test binary as the command, not the
// tests; a race in it still fails it.
func TestSelfAs(t *testing.T) {
	bin, err := SelfAs(t.TempDir(), "testenv-self")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(os.Getenv("GORACE"), "atexit_sleep_ms=0") {
		t.Errorf("GORACE=%q after SelfAs", os.Getenv("GORACE"))
	}
	run := func(arg string) (int, string, string) { return Run(t, exec.Command(bin, arg)) }
	if code, out, errs := run("hello"); code != 0 || out != "testenv-self says hello\n" {
		t.Errorf("testenv-self hello: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, _, errs := run("nonsense"); code != 2 {
		t.Errorf("testenv-self nonsense: exit %d, want 2 (the command's own answer)\n%s", code, errs)
	}
	if !raceBuild {
		return
	}
	if code, _, errs := run("race"); code != 66 || !strings.Contains(errs, "DATA RACE") {
		t.Errorf("testenv-self race: exit %d, want the race detector's 66\n%s", code, errs)
	}
}

// TestGoBuildFlags: -race exactly when this test binary has it.
func TestGoBuildFlags(t *testing.T) {
	got := strings.Join(GoBuildFlags(), " ")
	if want := map[bool]string{true: "-race", false: ""}[raceBuild]; got != want {
		t.Errorf("GoBuildFlags() = %q, want %q (race build: %v)", got, want, raceBuild)
	}
}
