package model

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// TestEnsureRealTemplate_progress: while mmdebstrap runs silent, the
// build says it still runs, with the time elapsed (issue 28: the first
// build takes minutes). The mmdebstrap here is a stand-in script.
func TestEnsureRealTemplate_progress(t *testing.T) {
	bin := t.TempDir()
	script := "#!/bin/sh\necho 'I: downloading packages with apt...'\nsleep 0.5\nfor a; do last=$a; done\necho archive > \"$last\"\n"
	if err := os.WriteFile(filepath.Join(bin, "mmdebstrap"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	defer func(d time.Duration) { realTemplateProgressEvery = d }(realTemplateProgressEvery)
	realTemplateProgressEvery = 100 * time.Millisecond
	var out lockedBuf
	p, err := EnsureRealTemplate(context.Background(), &out)
	if err != nil {
		t.Fatal(err)
	}
	got := out.b.String()
	for _, want := range []string{"building the real Debian 12 template (about 2.5 minutes, once: cached in ",
		"  mmdebstrap: I: downloading packages with apt...", "  still building the real Debian 12 template [", "real Debian 12 template ready in "} {
		if !strings.Contains(got, want) {
			t.Errorf("progress lacks %q:\n%s", want, got)
		}
	}
	if b, err := os.ReadFile(p); err != nil || string(b) != "archive\n" {
		t.Fatalf("template %s: %q %v", p, b, err)
	}
}
