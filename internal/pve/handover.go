package pve

import (
	"context"
	"sync"
)

// handOver passes the answers of a command's checks to the first read
// after them that asks the same: corral apply's preflight lists the
// guests and the token's permissions, and the plan it then shows lists
// them again milliseconds later (issue 30). Each answer is handed over
// once; a key already handed over, and every read once corral writes
// anything, is read fresh. The plan shown is only a proposal: the plan
// made under the lock, and the final check, read everything fresh.
type handOver struct {
	mu      sync.Mutex
	on      bool
	waiting map[string]any  // read while on, for the next reader of its key
	spent   map[string]bool // keys handed over already
}

// HandOverReads (on) makes c keep its next answer of each of
// ClusterResources and Permissions for the one read after it that asks
// the same; HandOverReads(false), and c's first write, end that and drop
// what was kept. For the preflight of corral apply and the plan it shows
// right after, in one process, with nothing written between them.
func (c *Client) HandOverReads(on bool) {
	h := &c.handOver
	h.mu.Lock()
	defer h.mu.Unlock()
	h.on = on
	h.waiting, h.spent = map[string]any{}, map[string]bool{}
}

// wrote ends the hand-over: what was read before a write may be stale.
func (h *handOver) wrote() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.on, h.waiting = false, nil
}

// handedOver is read's answer for key: the one kept for it (once), else
// a fresh read, kept for the next reader while the hand-over is on and
// key was not handed over yet.
func handedOver[T any](ctx context.Context, c *Client, key string, read func(context.Context) (T, error)) (T, error) {
	h := &c.handOver
	h.mu.Lock()
	if v, ok := h.waiting[key]; ok && h.on {
		delete(h.waiting, key)
		h.spent[key] = true
		h.mu.Unlock()
		return v.(T), nil
	}
	keep := h.on && !h.spent[key]
	h.mu.Unlock()
	out, err := read(ctx)
	if err != nil || !keep {
		return out, err
	}
	h.mu.Lock()
	if h.on {
		h.waiting[key] = out
	}
	h.mu.Unlock()
	return out, nil
}
