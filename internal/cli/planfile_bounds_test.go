package cli

import (
	"github.com/corralhq/corral/internal/testenv"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

// TestReadSavedPlan_bounded: a saved plan is outside input (apply FILE
// takes any path), so what is not a plan corral wrote is refused before
// it fills memory or blocks: a device, a FIFO, a file past the size
// limit, JSON nested or listed past the limits. Each case must end within
// a few seconds and allocate little; /dev/zero read without a limit never
// ends.
func TestReadSavedPlan_bounded(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.plan")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	large := filepath.Join(dir, "large.plan")
	f, err := os.Create(large)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(savedPlanMaxBytes + 1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	deep := filepath.Join(dir, "deep.plan")
	writeFile(t, deep, `{"format":"corral-plan/1","plan":`+strings.Repeat("[", 200_000)+strings.Repeat("]", 200_000)+`}`)
	wide := filepath.Join(dir, "wide.plan")
	writeFile(t, wide, `{"format":"corral-plan/1","targets":[`+strings.Repeat(`"a",`, savedPlanLimits.Values)+`"a"]}`)

	for _, tc := range []struct{ name, path, want string }{
		{"device", "/dev/zero", "not a regular file"},
		{"fifo", fifo, "not a regular file"},
		{"size", large, "more than"},
		{"depth", deep, "nested more than"},
		{"values", wide, "more than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			done := make(chan error, 1)
			go func() { _, err := readSavedPlan(tc.path); done <- err }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("readSavedPlan(%s) = %v, want an error with %q", tc.name, err, tc.want)
				}
				if !strings.Contains(err.Error(), "corral plan --out") {
					t.Errorf("the refusal does not say what a plan file is: %v", err)
				}
			case <-testenv.Expiry(t):
				t.Fatalf("readSavedPlan(%s) still running at the test's deadline", tc.name)
			}
			runtime.ReadMemStats(&after)
			if got := after.TotalAlloc - before.TotalAlloc; got > 128<<20 {
				t.Errorf("readSavedPlan(%s) allocated %d MiB", tc.name, got>>20)
			}
		})
	}
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}
