package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testenv"
)

const signalManifest = `apps:
  - name: web
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
`

// Issue 27: the first SIGTERM stops a read-only phase at once: a plan,
// status, volumes or apply before its first change waiting on a Proxmox
// VE that never answers (a loopback server that
// holds every request), and a validate of a 4 MiB manifest at the
// parser's limits. The test asserts only that corral exits (a generous
// 10 s, so load cannot fail it) and logs how long it took. It stays
// serial, the one test of this package that does: it runs before the
// parallel ones, on a machine this package does not load, so that its
// 10 s stays generous.
func TestSIGTERMStopsReadOnlyPhases(t *testing.T) {
	dir := t.TempDir()
	small := filepath.Join(dir, "corral.yaml")
	os.WriteFile(small, []byte(signalManifest), 0o644)
	big := filepath.Join(dir, "big.yaml")
	os.WriteFile(big, []byte(signalManifest+"    tags:\n"+strings.Repeat("      - "+strings.Repeat("y", 40)+"\n", (4<<20-200)/49)), 0o644)

	held := make(chan struct{}, 16)
	release := make(chan struct{})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		held <- struct{}{}
		select { // a PVE that never answers
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	pve := []string{"PROXMOX_VE_ENDPOINT=" + srv.URL, "PROXMOX_VE_API_TOKEN=root@pam!t=00000000-0000-0000-0000-000000000000", "PROXMOX_VE_INSECURE=1"}

	for _, tc := range []struct {
		name  string
		args  []string
		env   []string
		ready func(stderr *safeBuffer) bool // when to send SIGTERM
	}{
		{"plan waiting on PVE", []string{"plan", "-f", small}, pve, func(*safeBuffer) bool {
			select {
			case <-held:
				return true
			default:
				return false
			}
		}},
		{"status waiting on PVE", []string{"status", "-f", small}, pve, func(*safeBuffer) bool {
			select {
			case <-held:
				return true
			default:
				return false
			}
		}},
		{"apply planning, waiting on PVE", []string{"apply", "-f", small, "--auto-approve"}, pve, func(*safeBuffer) bool {
			select {
			case <-held:
				return true
			default:
				return false
			}
		}},
		{"volumes waiting on PVE", []string{"volumes"}, pve, func(*safeBuffer) bool {
			select {
			case <-held:
				return true
			default:
				return false
			}
		}},
		{"validate of a 4 MiB manifest", []string{"validate", "-f", big}, nil, func() func(*safeBuffer) bool {
			var start time.Time
			return func(*safeBuffer) bool { // once its signal handler is surely in place, while it parses
				if start.IsZero() {
					start = time.Now()
				}
				return time.Since(start) > 50*time.Millisecond
			}
		}()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(corralBin, tc.args...)
			cmd.Env = append(os.Environ(), tc.env...)
			var errb safeBuffer
			cmd.Stderr = &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			t.Cleanup(func() { // if the wait below gives up
				cmd.Process.Kill()
				if t.Failed() {
					t.Logf("stderr:\n%s", errb.String())
				}
			})
			testenv.WaitFor(t, "the process to be ready for the signal", func() bool { return tc.ready(&errb) })
			sent := time.Now()
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case err := <-exited:
				code := 0
				if ee, ok := err.(*exec.ExitError); ok {
					code = ee.ExitCode()
				}
				t.Logf("exited %d, %v after SIGTERM", code, time.Since(sent).Round(time.Millisecond))
			case <-testenv.Expiry(t):
				cmd.Process.Kill()
				t.Fatalf("still running at the test's deadline, %s after SIGTERM:\n%s", time.Since(sent).Round(time.Second), errb.String())
			}
		})
	}
}
