package apply

import "time"

// SetReprotectDelay sets reprotect's first pause for the package's tests
// and returns the one it replaced.
func SetReprotectDelay(d time.Duration) time.Duration {
	old := reprotectFirstDelay
	reprotectFirstDelay = d
	return old
}
