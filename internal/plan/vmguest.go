package plan

import (
	"fmt"
	"net/url"
	"strings"
)

// A VM app's guest work (provision:, health:) is planned as a
// container's: all of it for a new VM, and for an existing one what its
// Notes record as done (planGuest). Corral's own lines in the Notes
// (the pinned host key, the provisioned digest, the steps, where
// provisioning stopped) are corral's, not the manifest's, and are kept.

// CorralKeyComment is the comment of corral's own SSH key in a VM's
// sshkeys: apply adds the key to every VM it creates, for its logins,
// and the plan leaves it out when it compares the app's keys.
const CorralKeyComment = "corral"

// vmGuest plans the guest work of VM app a into c: vm is its VM, nil
// for a new one (or one replaced).
func vmGuest(c *Change, a *App, vm *VM) {
	if vm == nil {
		c.Guest = a.GuestDigest != ""
		c.Steps, c.Restarts, _ = planSteps(a, "", true)
		return
	}
	planGuest(c, a, vm.Config["description"])
	if c.Guest && ParseMarker(vm.Config["description"]).Stopped == nil {
		c.Reasons = append(c.Reasons, "provisioning or health checks changed since the last apply")
	}
}

// vmKeptDescription is the Notes a VM app wants (desc, VMDescription)
// with corral's guest lines of the VM's Notes have kept.
func vmKeptDescription(desc, have string) string {
	m := ParseMarker(have)
	desc = WithGuestRecord(desc, m.HostKey, m.Provisioned, m.Steps)
	if m.Stopped != nil {
		desc += markerStopped + m.stoppedRaw + "\n"
	}
	return desc
}

// vmUserKeys is an sshkeys value without corral's own key (the line
// whose comment is CorralKeyComment), "" when no other key is left.
func vmUserKeys(v string) string {
	keys, err := url.PathUnescape(v)
	if err != nil {
		return v
	}
	var out []string
	for line := range strings.SplitSeq(keys, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || len(f) == 3 && f[2] == CorralKeyComment {
			continue
		}
		out = append(out, strings.TrimSpace(line))
	}
	if len(out) == 0 {
		return ""
	}
	return encodeSSHKeys(out)
}

// vmGuestReason says what a VM app's plan runs inside it, for the
// create's reasons.
func vmGuestReason(a *App) string {
	if a.GuestDigest == "" {
		return ""
	}
	return fmt.Sprintf("then provisioned over SSH as %s (sudo), its host key trusted on first use and pinned in its Notes", a.VM.User)
}
