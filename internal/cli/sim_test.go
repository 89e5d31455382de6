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

// TestSimServe_sharedStorage: `corral sim serve --shared-storage nfs,rbd`
// creates a state with both shared storages; an unknown kind is refused.
func TestSimServe_sharedStorage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sim")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb lockedBuffer
	done := make(chan int)
	go func() {
		done <- Run(ctx, []string{"sim", "serve", "--state", dir, "--listen", "127.0.0.1:0", "--nodes", "3",
			"--shared-storage", "nfs,rbd", "--time-scale", "0", "--guest-ssh-port", "0"}, strings.NewReader(""), &out, &errb)
	}()
	testenv.WaitFor(t, "sim serve to print its credentials", func() bool {
		select {
		case code := <-done:
			t.Fatalf("sim serve exited %d early\n%s%s", code, out.String(), errb.String())
		default:
		}
		return strings.Contains(out.String(), "credentials:")
	})
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("sim serve exit %d\n%s", code, errb.String())
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
