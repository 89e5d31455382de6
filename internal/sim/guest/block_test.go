package guest

import (
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestClaimBlock: a second claim on the same port gets another block; a
// claim on another port may share it; a state directory's block is
// tried first and kept when free.
func TestClaimBlock(t *testing.T) {
	t.Parallel()
	// The ports are below the kernel's ephemeral range, which every other
	// test's emulator takes its free port from (a listener on
	// 127.0.0.1:0), and stay bound on 127.0.0.1 until the test ends: an
	// emulator of a test side by side (in this process or another: go
	// test runs packages side by side) that claimed a block on one of
	// them between the restart's two claims made CI see the restart
	// "move", even with the ports held, as a port handed out and released
	// before this test took it could still be that emulator's.
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 2048 {
				low = n
			}
		}
	}
	freePort := func() int {
		for range 1000 {
			p := low - 1024 - rand.IntN(low-2048)
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				continue
			}
			t.Cleanup(func() { l.Close() })
			return p
		}
		t.Fatalf("no free port below %d on 127.0.0.1", low-1024)
		return 0
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
