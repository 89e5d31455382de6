package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/corralhq/corral/internal/sim/model"
	"github.com/corralhq/corral/internal/testenv"
)

// lockedBuffer is a bytes.Buffer safe to read while the command writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// servedSim is `corral sim serve` run in this process for a test, on a
// state directory of its own, a free loopback port and instant tasks.
type servedSim struct {
	dir       string
	out, errb lockedBuffer
	cancel    context.CancelFunc
	done      chan int
	code      *int
}

// serveSim starts corral sim serve with args besides the state, listen
// address, time scale and guest SSH port, and returns once it printed
// its credentials; the test's cleanup stops it.
func serveSim(t *testing.T, args ...string) *servedSim {
	t.Helper()
	s := &servedSim{dir: filepath.Join(t.TempDir(), "sim"), done: make(chan int, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() {
		s.done <- Run(ctx, append([]string{"sim", "serve", "--state", s.dir, "--listen", "127.0.0.1:0", "--time-scale", "0", "--guest-ssh-port", "0"}, args...),
			strings.NewReader(""), &s.out, &s.errb)
	}()
	t.Cleanup(func() { s.stop() })
	testenv.WaitFor(t, "sim serve to print its credentials", func() bool {
		select {
		case code := <-s.done:
			s.code = &code
			t.Fatalf("sim serve exited %d early\n%s%s", code, s.out.String(), s.errb.String())
		default:
		}
		return strings.Contains(s.out.String(), "credentials:")
	})
	return s
}

// stop ends it as Ctrl-C does and returns its exit status.
func (s *servedSim) stop() int {
	s.cancel()
	if s.code == nil {
		code := <-s.done
		s.code = &code
	}
	return *s.code
}

// env is what its DIR/env file exports.
func (s *servedSim) env(t *testing.T) map[string]string {
	t.Helper()
	env, err := os.ReadFile(filepath.Join(s.dir, "env"))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, line := range strings.Split(string(env), "\n") {
		if k, v, ok := strings.Cut(strings.TrimPrefix(line, "export "), "="); ok {
			vars[k] = strings.Trim(v, "'")
		}
	}
	return vars
}

// TestSimServe_sharedStorage: `corral sim serve --shared-storage nfs,rbd`
// creates a state with both shared storages; an unknown kind is refused.
func TestSimServe_sharedStorage(t *testing.T) {
	t.Parallel()
	s := serveSim(t, "--nodes", "3", "--shared-storage", "nfs,rbd")
	dir := s.dir
	if code := s.stop(); code != 0 {
		t.Fatalf("sim serve exit %d\n%s", code, s.errb.String())
	}
	c, err := model.Open(model.Options{Dir: dir, Nodes: 3})
	if err != nil {
		t.Fatal(err)
	}
	got := c.SharedStorages()
	c.Close()
	if !slices.Equal(got, []string{"nfs", "rbd"}) {
		t.Errorf("shared storages %v, want [nfs rbd]", got)
	}

	var out2, err2 bytes.Buffer
	code := Run(context.Background(), []string{"sim", "serve", "--state", t.TempDir(), "--listen", "127.0.0.1:0", "--shared-storage", "cifs"}, strings.NewReader(""), &out2, &err2)
	if code == 0 || !strings.Contains(err2.String(), `unknown shared storage "cifs" (want nfs or rbd)`) {
		t.Errorf("--shared-storage cifs: exit %d\n%s", code, err2.String())
	}
	if _, err := os.Stat(dir); err != nil {
		t.Error(err)
	}
}
