package apply

import "testing"

// TestSoleOwner: the free's check leaves a keeper's config unread only
// when that keeper owns every volume checked; with two owners (a
// keeper's config may name another keeper's volume by hand) or a volume
// of no known owner, every config is read.
func TestSoleOwner(t *testing.T) {
	owner := map[string]int{"l:vm-100-disk-0": 100, "l:vm-100-disk-1": 100, "l:vm-200-disk-0": 200}
	for _, tc := range []struct {
		volids []string
		want   int
	}{
		{[]string{"l:vm-100-disk-0"}, 100},
		{[]string{"l:vm-100-disk-0", "l:vm-100-disk-1"}, 100},
		{[]string{"l:vm-100-disk-0", "l:vm-200-disk-0"}, 0},
		{[]string{"l:vm-100-disk-0", "l:vm-300-disk-0"}, 0},
		{nil, 0},
	} {
		if got := soleOwner(tc.volids, owner); got != tc.want {
			t.Errorf("soleOwner(%v) = %d, want %d", tc.volids, got, tc.want)
		}
	}
}
