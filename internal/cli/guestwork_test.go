package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// An env file corral writes reads back as the same values when a POSIX
// shell sources it (set -a; . FILE), the strictest of its readers: a
// value like a>/path must not become a redirect (issue 12, item 6).
func TestEnvQuoteReadBySh(t *testing.T) {
	values := []string{"plain", "a>/path", "x<y", "a|b", "a&b", "a;b", "(x)", "*", "?", "[a]", "~root", "{a,b}", "a!b",
		"with space", "tab\there", `quote"d`, "it's", `back\slash`, "$HOME", "`id`", "#hash", "sk-or-v1-abc123", "=eq=", ""}
	dir := t.TempDir()
	for _, v := range values {
		file := filepath.Join(dir, "env")
		if err := os.WriteFile(file, []byte("V="+envQuote(v)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("/bin/sh", "-c", `set -a; . "$1"; printf %s "$V"`, "sh", file).CombinedOutput()
		if err != nil || string(out) != v {
			t.Errorf("V=%s read by sh as %q (%v), want %q", envQuote(v), out, err, v)
		}
	}
}
