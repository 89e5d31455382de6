package guest

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

// TestClaimBlock: a second claim on the same port gets another block; a
// claim on another port may share it; a state directory's block is
// tried first and kept when free.
func TestClaimBlock(t *testing.T) {
	t.Parallel()
	// The ports stay bound on 127.0.0.1 until the test ends, so that no
	// other test's emulator (in this process or another: go test runs
	// packages side by side) is handed one as its free port and claims a
	// block on it meanwhile: CI saw a restart "move" when one did.
	freePort := func() int {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l.Addr().(*net.TCPAddr).Port
	}
	port, other := freePort(), freePort()
	dirA, dirB, dirC := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(dirA, blockFile), []byte("42\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name      string
		dir       string
		port      int
		wantBlock int // 0: any block but 42
	}{
		{"the state's block, free", dirA, port, 42},
		{"another emulator on the same port", dirB, port, 0},
		{"another emulator on another port may share", dirA, other, 42},
		{"the taken block is not reused, even when preferred", dirA, port, 0},
	}
	for _, s := range steps {
		b, ln, err := claimBlock(s.dir, s.port)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		defer ln.Close()
		if (s.wantBlock != 0 && b != s.wantBlock) || (s.wantBlock == 0 && b == 42) {
			t.Errorf("%s: block %d", s.name, b)
		}
	}
	// A restarted emulator takes its state's remembered block once it is free.
	b1, ln1, err := claimBlock(dirC, port)
	if err != nil {
		t.Fatal(err)
	}
	ln1.Close()
	b2, ln2, err := claimBlock(dirC, port)
	if err != nil {
		t.Fatal(err)
	}
	ln2.Close()
	if b1 != b2 {
		t.Errorf("restart moved from block %d to %d", b1, b2)
	}
}
