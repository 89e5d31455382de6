package cli

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// TestLoadIdentity_concurrentFirstUse: corral runs that start at once on
// a machine without corral's key all end with the same key, and none
// reads it half written (before, a second run could parse the first
// one's partly written file and fail with "remove it").
func TestLoadIdentity_concurrentFirstUse(t *testing.T) {
	for round := range 20 {
		path := filepath.Join(t.TempDir(), "corral", "id_ed25519")
		t.Setenv("CORRAL_SSH_KEY", path)
		const n = 8
		keys := make([]string, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				id, err := loadIdentity()
				if err == nil {
					keys[i] = id.authorizedKey
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("round %d, run %d: %v", round, i, errs[i])
			}
			if keys[i] != keys[0] {
				t.Fatalf("round %d: run %d has another key than run 0", round, i)
			}
		}
		left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".id_ed25519-*"))
		if len(left) > 0 {
			t.Errorf("round %d: temporary files left: %v", round, left)
		}
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("round %d: key file %v, err %v; want mode 0600", round, fi.Mode(), err)
		}
	}
}
