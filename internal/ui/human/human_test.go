package human

import "testing"

func TestSize(t *testing.T) {
	for _, c := range []struct {
		in   int64
		want string
	}{
		{0, "0 B"},
		{17, "17 B"},
		{1023, "1023 B"},
		{1024, "1 KiB"},
		{1536, "1.5 KiB"},
		{512 << 20, "512 MiB"},
		{3584 << 20, "3.5 GiB"},
		{8 << 30, "8 GiB"},
		{1<<30 - 1, "1 GiB"},
		{5 << 40, "5 TiB"},
		{1288490188, "1.2 GiB"},
	} {
		if got := Size(c.in); got != c.want {
			t.Errorf("Size(%d) = %q, want %q", c.in, got, c.want)
		}
	}
}
