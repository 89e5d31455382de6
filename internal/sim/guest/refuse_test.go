package guest_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/sim/guest"
	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/testenv"
)

// TestMain opts this package's tests in to the unisolated view where LXC
// cannot run (not root, no lxc package): most tests here are about the
// SSH endpoint and sessions, which the view serves too. Tests of the
// isolation itself skip there (needIsolation); the refusal tests below
// clear the opt-in.
//
// Every test but those of startViewManager (t.Setenv) has a cluster and
// a Manager of its own (its guests' port from freePort, its loopback
// block claimed: block.go) and runs beside the others, 4 at once unless -parallel says otherwise: they
// wait on boot delays, sshd handshakes and container starts more than
// they compute, and one after another they held a slot of a newcomer's
// `go test -race ./...` for 27 s at its end (issue 30).
func TestMain(m *testing.M) {
	if os.Getenv(guest.UnisolatedEnv) == "" {
		os.Setenv(guest.UnisolatedEnv, "1")
	}
	testenv.DefaultParallel(4)
	testenv.Exit(m.Run())
}

// startViewManager starts a Manager with LXC forced unavailable
// (CORRAL_SIM_RUNTIME=view) and the opt-in set to optIn, logging into
// the returned buffer.
func startViewManager(t *testing.T, optIn string) (*model.Cluster, *guest.Manager, *bytes.Buffer) {
	t.Helper()
	t.Setenv("CORRAL_SIM_RUNTIME", "view")
	t.Setenv(guest.UnisolatedEnv, optIn)
	c, err := model.Open(model.Options{Dir: t.TempDir(), HasTimeScale: true, TimeScale: 0})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var log bytes.Buffer
	m, err := guest.Start(c, guest.Options{Port: freePort(t), Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return c, m, &log
}

// createAndStart creates CT 131 and starts it, returning the start task.
func createAndStart(t *testing.T, c *model.Cluster) model.Task {
	t.Helper()
	auth := model.Auth{UserID: "root@pam"}
	upid, err := c.CreateCT(auth, "pve", map[string]string{"vmid": "131", "ostemplate": model.DefaultTemplate, "rootfs": "local-lvm:1"})
	if err != nil {
		t.Fatal(err)
	}
	if task, err := c.WaitTask(context.Background(), "pve", upid); err != nil || (task.ExitStatus != "OK" && !strings.HasPrefix(task.ExitStatus, "WARNINGS")) {
		t.Fatalf("create: %v %v", task.ExitStatus, err)
	}
	upid, err = c.StartCT(auth, "pve", 131, nil)
	if err != nil {
		t.Fatal(err)
	}
	task, err := c.WaitTask(context.Background(), "pve", upid)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// TestGuest_refusesUnisolated: where LXC cannot run and nobody opted in,
// a CT's start task fails with one message naming the fix, so no guest
// command can run on the host; the emulator says so for preflight.
func TestGuest_refusesUnisolated(t *testing.T) {
	c, m, _ := startViewManager(t, "")
	for _, err := range []error{m.Refused(), m.ExecUnavailable()} {
		if err == nil || !strings.Contains(err.Error(), "cannot isolate containers") ||
			!strings.Contains(err.Error(), "apt-get install --no-install-recommends lxc") ||
			!strings.Contains(err.Error(), "--unisolated-guests / CORRAL_SIM_UNISOLATED=1") {
			t.Fatalf("refusal = %v", err)
		}
	}
	task := createAndStart(t, c)
	if task.ExitStatus == "OK" || !strings.Contains(task.ExitStatus, "cannot isolate containers") {
		t.Fatalf("start task exit status %q, want the refusal", task.ExitStatus)
	}
	if st, err := c.CTStatus("pve", 131); err == nil && st.Status == "running" {
		t.Fatal("CT 131 is running after a refused start")
	}
}

// TestGuest_unisolatedOptIn: with CORRAL_SIM_UNISOLATED=1 the view runs
// and the log names the danger loudly.
func TestGuest_unisolatedOptIn(t *testing.T) {
	c, m, log := startViewManager(t, "1")
	if err := m.Refused(); err != nil {
		t.Fatalf("refused with the opt-in: %v", err)
	}
	if !strings.Contains(log.String(), "GUEST COMMANDS RUN UNISOLATED ON THIS HOST") {
		t.Fatalf("no loud warning in the log:\n%s", log)
	}
	if task := createAndStart(t, c); task.ExitStatus != "OK" && !strings.HasPrefix(task.ExitStatus, "WARNINGS") {
		t.Fatalf("start task: %q", task.ExitStatus)
	}
}
