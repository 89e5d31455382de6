package guest_test

import (
	"cmp"
	"strings"
	"testing"

	client "github.com/corralhq/corral/internal/guest"
)

// TestGuest_keyctlAsPVE: an unprivileged CT may call keyctl(2) only with
// features keyctl=1; without it the call answers ENOSYS, as
// pve-container's seccomp config makes it (Docker's runtime is what
// notices). A privileged CT is not filtered.
func TestGuest_keyctlAsPVE(t *testing.T) {
	t.Parallel()
	k := newKit(t)
	k.needIsolation()
	// keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, create):
	// syscall 250 on x86_64.
	const enosys = "stdout: error: Function not implemented"
	const probe = `perl -e '$r = syscall(250, 0, -3, 1); print $r < 0 ? "error: $!\n" : "ok\n"'`
	k.create(150, nil)
	k.create(151, map[string]string{"features": "nesting=1,keyctl=1"})
	k.create(152, map[string]string{"unprivileged": "0", "features": ""})
	for _, tt := range []struct {
		vmid       int
		name, want string
	}{
		{150, "unprivileged, nesting only", enosys},
		{151, "unprivileged, keyctl=1", ""},
		{152, "privileged", ""},
	} {
		c, err := k.dial(tt.vmid, client.HostKeyPolicy{TrustOnFirstUse: true})
		if err != nil {
			t.Fatal(err)
		}
		out, err := run(t, c, probe)
		c.Close()
		// Where the call is allowed, the kernel answers (a key, or an
		// error of its own: the quota of host uid 100000 is shared by
		// every unprivileged CT on the host); only the filter says ENOSYS.
		if err != nil || tt.want != "" && out != tt.want || tt.want == "" && (out == enosys || !strings.HasPrefix(out, "stdout: ")) {
			t.Errorf("CT %d (%s): keyctl: %q, %v; want %q", tt.vmid, tt.name, out, err, cmp.Or(tt.want, "anything but ENOSYS"))
		}
	}
}
