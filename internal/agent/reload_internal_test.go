package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/localfile"
	"github.com/corralhq/corral/internal/testutil/memcap"
)

// Issue 27: the agent reads its manifest with the manifest's size limit:
// a file past it is reported, and the agent keeps the last valid
// manifest, without reading the file into memory.
func TestReload_manifestTooLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "corral.yaml")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 * localfile.MaxManifest); err != nil { // sparse: 256 MiB of zeros
		t.Fatal(err)
	}
	f.Close()
	a := New(Config{Path: path}, nil)
	var changed bool
	n := memcap.Allocated(func() { changed = a.reload() })
	if changed {
		t.Fatal("reload() = true for a file it cannot read")
	}
	if n > 1<<20 {
		t.Errorf("reload() allocated %d KiB for a file it refuses", n>>10)
	}
	ev := a.Events.List()
	if len(ev) != 1 || !strings.Contains(ev[0].Message, "more than the 4 MiB corral reads") || !strings.Contains(ev[0].Message, "keeping the last valid one") {
		t.Fatalf("events = %+v, want the size limit reported", ev)
	}
}
