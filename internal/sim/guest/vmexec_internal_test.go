package guest

import (
	"bytes"
	"testing"
)

// TestCapture: guest-exec keeps qemu-ga's first 16 MiB of a stream
// and says it dropped the rest; a stream that fits is not truncated.
func TestCapture(t *testing.T) {
	t.Parallel()
	var c capture
	chunk := bytes.Repeat([]byte("a"), maxExecOutput/2)
	c.Write(chunk)
	c.Write(chunk)
	if len(c.b) != maxExecOutput || c.truncated {
		t.Fatalf("exactly 16 MiB: %d bytes, truncated %v", len(c.b), c.truncated)
	}
	if n, err := c.Write([]byte("bc")); n != 2 || err != nil || len(c.b) != maxExecOutput || !c.truncated {
		t.Fatalf("past 16 MiB: wrote %d %v, kept %d, truncated %v", n, err, len(c.b), c.truncated)
	}
}
