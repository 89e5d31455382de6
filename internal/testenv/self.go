package testenv

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// A test that needs corral as a process of its own (signals, SIGKILL, a
// second corral at the same time, a binary installed into a container)
// runs the test binary itself under the command's name: it links
// everything the program does, and its TestMain starts with
//
//	if testenv.RunningAs("corral") { os.Exit(cli.Main()) }
//
// Building the program with `go build` instead, as these tests did,
// compiled the standard library and every package a second time without
// -race on a newcomer's first `go test -race ./...` (88 CPU-s of a 2-core
// machine's 650, issue 30), and tested a binary the race detector never
// saw.

// RunningAs reports whether this process was started as the command name,
// through the link SelfAs made: TestMain then runs the program and exits
// before anything of the tests runs.
func RunningAs(name string) bool {
	return filepath.Base(os.Args[0]) == name
}

// SelfAs makes the running test binary available as dir/name, a hard link
// (a copy where dir is on another file system), and returns its path.
//
// Under -race the processes started from it run under the race detector
// too: a race in them is reported on their stderr and makes them exit 66.
// SelfAs sets GORACE's atexit_sleep_ms=0 in this process's environment,
// which they inherit: without it each one that exits 0 would first wait
// the detector's second (see Exit), and the tests start hundreds.
func SelfAs(dir, name string) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the test binary: %w", err)
	}
	dst := filepath.Join(dir, name)
	if err := os.Link(exe, dst); err != nil {
		if err := copyExecutable(exe, dst); err != nil {
			return "", fmt.Errorf("the test binary as %s: %w", name, err)
		}
	}
	os.Setenv("GORACE", RaceOptions())
	return dst, nil
}

// RaceOptions is GORACE's value for a process a test starts from a
// race-built binary: this process's options, with atexit_sleep_ms=0
// unless they set it, so that it exits without the detector's second.
func RaceOptions() string {
	g := os.Getenv("GORACE")
	if strings.Contains(g, "atexit_sleep_ms") {
		return g
	}
	return strings.TrimSpace(g + " atexit_sleep_ms=0")
}

// GoBuildFlags are the flags for a `go build` that a test runs (a
// third-party client built from testdata) to build as the test binary
// was: "-race" under -race, else none. Built otherwise, it compiled the
// standard library a second time on a newcomer's first `go test -race
// ./...` (about 38 CPU-s of the run's 570, issue 30), where built alike
// it finds every standard package in the build cache. A race the
// detector finds in the client fails its run with exit code 66.
func GoBuildFlags() []string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "-race" && s.Value == "true" {
				return []string{"-race"}
			}
		}
	}
	return nil
}

// BuildModule builds the main package of the nested module in dir (a
// third-party client or checker under testdata, with a go.mod and go.sum
// of its own, so that corral's go.mod does not depend on it) with the go
// command of this test's GOROOT and GoBuildFlags, and returns the
// binary's path. Its modules come from the module proxy or the module
// cache: where neither has them, the test lacks need (Lackf). Run the
// binary with GORACE=RaceOptions().
func BuildModule(t testing.TB, dir string, need Requirement, what string) string {
	t.Helper()
	goCmd := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := exec.LookPath(goCmd); err != nil {
		t.Fatalf("no go command beside this test's GOROOT: %v", err)
	}
	env := []string{"GOWORK=off", "GOFLAGS=-mod=readonly -buildvcs=false"}
	dl := exec.Command(goCmd, "mod", "download")
	dl.Dir, dl.Env = dir, append(dl.Environ(), env...)
	if out, err := dl.CombinedOutput(); err != nil {
		Lackf(t, need, "go mod download of %s failed (is the Go module proxy reachable?): %v\n%s", what, err, out)
	}
	bin := filepath.Join(t.TempDir(), filepath.Base(dir))
	build := exec.Command(goCmd, append(append([]string{"build"}, GoBuildFlags()...), "-o", bin, ".")...)
	build.Dir, build.Env = dir, append(build.Environ(), env...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", what, err, out)
	}
	return bin
}

func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
