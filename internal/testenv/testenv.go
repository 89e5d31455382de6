// Package testenv is corral's one test environment layer, modelled on Go's
// own internal/testenv: every test package, internal/sim's included,
// imports it (it is a leaf: the standard library only, no net/http) for
//
//   - what a test needs from the machine (Lack, NeedRoot): a test that
//     cannot run here skips with one clear message, unless the matching
//     CORRAL_REQUIRE_<NAME> variable is set (to anything but "" or "0"),
//     in which case it fails instead. That is the one rule: CI sets the
//     variables of what it must have (.ci/run), so a machine that lost
//     root, LXC or ../shared fails the build instead of silently skipping;
//   - one condition wait (WaitFor), which only polls and gives up at the
//     test's own deadline, never after a guess of how slow the machine
//     is, and that deadline for a test's other waits (GiveUp, Expiry,
//     Context);
//   - one golden-file comparison (Golden) and the one -update flag that
//     rewrites golden files and generated doc sections (Updating).
//
// Only tests import it.
package testenv

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A Requirement is something a test may need from the machine it runs on.
// Its variable, CORRAL_REQUIRE_<Requirement>, turns the test's skip into
// a failure where the machine must have it.
type Requirement string

// The requirements corral's tests have. .ci/run sets the variable of each
// one CI provides.
const (
	// Root: the effective user is root (other owners, device nodes, the
	// emulator's writable guest view).
	Root Requirement = "ROOT"
	// LXC: the emulator's CTs run as LXC containers (isolated, in their
	// own namespaces, unprivileged ones in PVE's user namespace).
	LXC Requirement = "LXC"
	// GuestExec: commands can run inside the emulator's CTs.
	GuestExec Requirement = "GUEST_EXEC"
	// Shared: the reference data in ../shared beside the checkout, and the
	// systemd tools the env-file tests compare against.
	Shared Requirement = "SHARED"
	// Browser: a headless chromium for the agent's status page.
	Browser Requirement = "BROWSER"
	// Ansible: ansible-inventory with community.general's proxmox
	// inventory plugin (Debian's ansible), run against the emulator.
	Ansible Requirement = "ANSIBLE"
	// Proxmoxer: python3 with the proxmoxer and requests modules
	// (Debian's python3-proxmoxer).
	Proxmoxer Requirement = "PROXMOXER"
	// NPM: node and npm, and the npm registry to install the proxmox-api
	// package from (or a warm cache of it).
	NPM Requirement = "NPM"
	// GoProxmox: the Go module proxy (or a warm module cache) to build the
	// go-proxmox client's nested module with.
	GoProxmox Requirement = "GO_PROXMOX"
	// Promlint: the Go module proxy (or a warm module cache) to build
	// internal/metrics' checker of the /metrics text, client_golang's
	// linter and parser in a nested module (tried with FullVar or this
	// requirement only: it costs what internal/metrics saves).
	Promlint Requirement = "PROMLINT"
	// BPG: Terraform and bpg's terraform-provider-proxmox, at the paths
	// CORRAL_TEST_TERRAFORM and CORRAL_TEST_BPG_PROVIDER name.
	BPG Requirement = "BPG"
	// KVM: the emulator's VMs run as real QEMU/KVM guests (qemu-system-x86,
	// qemu-utils, genisoimage, mmdebstrap, a usable /dev/kvm).
	KVM Requirement = "KVM"
)

// Env is the variable that makes r required: CORRAL_REQUIRE_<r>.
func (r Requirement) Env() string { return "CORRAL_REQUIRE_" + string(r) }

// Required reports whether r's variable is set to anything but "" or "0".
func (r Requirement) Required() bool {
	v := os.Getenv(r.Env())
	return v != "" && v != "0"
}

// Lack says that this machine lacks r, for the reason given: the test is
// skipped, or fails when r is required (see Required). Either way it
// stops here.
func Lack(t testing.TB, r Requirement, reason string) {
	t.Helper()
	if r.Required() {
		t.Fatalf("%s, and %s is set: this machine must have it", reason, r.Env())
		return
	}
	t.Skipf("skipped: %s (%s=1 makes this a failure)", reason, r.Env())
}

// Lackf is Lack with a formatted reason.
func Lackf(t testing.TB, r Requirement, format string, args ...any) {
	t.Helper()
	Lack(t, r, fmt.Sprintf(format, args...))
}

// NeedRoot stops the test unless it runs as root; why says what needs it.
func NeedRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Lackf(t, Root, "%s needs root (CI runs as root)", why)
	}
}

// NeedGuestExec stops the test when unavailable, the reason guest
// commands cannot run here (guest.Manager.ExecUnavailable), is not nil.
func NeedGuestExec(t testing.TB, unavailable error) {
	t.Helper()
	if unavailable != nil {
		Lack(t, GuestExec, unavailable.Error())
	}
}

// WaitFor waits until cond holds, checking often, and fails the test
// naming what it waited for if it never does. It gives up only shortly
// before the test's own deadline (-timeout; 10 minutes without one), so a
// slow or loaded machine makes it wait longer, never fail.
//
// Between checks it pauses at least as long as the last check took: a
// cond that runs a corral command or reads a container spends at most
// half the time checking. Checked every 20 ms, such a cond (tens of
// milliseconds under -race) had kept a core busy for as long as a test
// waited on a one-second agent loop.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := GiveUp(t)
	for pause := time.Millisecond; ; pause = min(2*pause, 20*time.Millisecond) {
		began := time.Now()
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(max(pause, time.Since(began)))
	}
}

// GiveUp is when a wait of t gives up: shortly before the test binary's
// own deadline (-timeout; 10 minutes from now without one). A wait that
// ends there fails with what it waited for, where a wall-clock guess of
// how slow the machine is would fail a correct run on a loaded one; one
// shortly before the deadline keeps the failure the test's own message
// rather than the binary's panic.
func GiveUp(t testing.TB) time.Time {
	if d, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if dl, ok := d.Deadline(); ok {
			return dl.Add(-5 * time.Second)
		}
	}
	return time.Now().Add(10 * time.Minute)
}

// Expiry fires at GiveUp(t): the other arm of a select that waits for
// something to happen.
func Expiry(t testing.TB) <-chan time.Time { return time.After(time.Until(GiveUp(t))) }

// Context ends at GiveUp(t), or when the test ends: for a command or a
// request the test waits for, so that one that hangs returns (and the
// test says what it waited for) instead of the binary's timeout.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithDeadline(context.Background(), GiveUp(t))
	t.Cleanup(cancel)
	return ctx
}

// update is the one -update flag of every test binary that imports
// testenv.
var update = flag.Bool("update", false, "rewrite golden files and generated doc sections with what the tests produce")

// Updating reports whether the tests run with -update: a test that
// checks a generated file of its own (a section of a doc page) rewrites
// it instead.
func Updating() bool { return *update }

// Golden compares got with the file at path, byte for byte. With -update
// it writes got there instead (making the directory).
func Golden(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (run go test -update to accept it, then review the diff):\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}
