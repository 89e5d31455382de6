package pve_test

import (
	"net/http"
	"strings"
	"testing"
)

// Issue 27: an archive's config larger than any guest config (pmxcfs
// keeps no file over 1 MiB) is refused with the limit, before apply
// parses it.
func TestClient_BackupConfig_bounded(t *testing.T) {
	for _, tc := range []struct {
		name string
		size int
		want string
	}{
		{"1 MiB", 1 << 20, ""},
		{"past 1 MiB", 1<<20 + 1, "more than the 1048576 bytes a guest config can be"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := "hostname: web\n" + strings.Repeat("#", tc.size-len("hostname: web\n"))
			c := newTestClient(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { writeData(w, text) }))
			got, err := c.BackupConfig(ctx(t), "pve", "local:backup/vzdump-lxc-100-2026_01_01-00_00_00.tar.zst")
			if tc.want == "" {
				if err != nil || got != text {
					t.Fatalf("BackupConfig() = %d bytes, %v", len(got), err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("BackupConfig() = %v, want %q", err, tc.want)
			}
		})
	}
}
