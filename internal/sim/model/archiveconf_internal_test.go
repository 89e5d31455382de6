package model

import (
	"archive/tar"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/testutil/memcap"
)

// writeArchive writes a plain tar holding pct.conf with conf.
func writeArchive(t *testing.T, conf string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "vzdump-lxc-100-2026_01_01-00_00_00.tar")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	tw.WriteHeader(&tar.Header{Name: "./etc/vzdump/pct.conf", Mode: 0o644, Size: int64(len(conf)), Typeflag: tar.TypeReg})
	tw.Write([]byte(conf))
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return p
}

// Issue 27: an archive's config larger than any guest config is refused
// with the limit, not cut short and restored as a different config.
func TestReadBackupConfig_bounded(t *testing.T) {
	t.Parallel()
	ok := "hostname: web\n" + strings.Repeat("#"+strings.Repeat("d", 1000)+"\n", 1000)
	if got, err := readBackupConfig(writeArchive(t, ok)); err != nil || got != ok {
		t.Fatalf("readBackupConfig() = %d bytes, %v; want the %d-byte config", len(got), err, len(ok))
	}
	big := ok + strings.Repeat("x", maxArchiveConfig)
	if _, err := readBackupConfig(writeArchive(t, big)); err == nil || !strings.Contains(err.Error(), "more than 1048576 bytes") {
		t.Fatalf("readBackupConfig() = %v, want the 1 MiB limit", err)
	}
}

// FuzzArchiveConfig: whatever an archive's pct.conf holds, up to
// maxArchiveConfig, parseConfigSection reads it without panicking,
// within a memory cap of 16 times its size plus 1 MiB, and every key it
// returns came from a "key: value" line.
func FuzzArchiveConfig(f *testing.F) {
	for _, s := range []string{
		"arch: amd64\nhostname: web\nmp0: local-lvm:vm-100-disk-1,mp=/data\n#desc%3A\nlxc.environment.runtime: A=1\n[snap]\nhostname: old\n",
		"", "\n\n\n", ": x\n", "a:b\n", "#" + strings.Repeat("%", 3000), strings.Repeat("k: v\n", 5000), strings.Repeat("x", 10000),
		strings.Repeat("lxc.environment.runtime: A=1\n", 2000), "[", "\x00: \xff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		if len(text) > maxArchiveConfig {
			return
		}
		var conf map[string]string
		memcap.Run(t, 16*uint64(len(text))+1<<20, len(text), func() { conf = parseConfigSection(text) })
		for k := range conf {
			if k != "description" && k != "env" && !strings.Contains(text, k+": ") {
				t.Fatalf("key %q not from a line of the config", k)
			}
		}
	})
}
