package pve

import "time"

// FastRetries shrinks c's retry delays so tests of retry behaviour run in
// milliseconds; the schedules' shapes are unchanged.
func FastRetries(c *Client) {
	c.retry.first, c.retry.max = time.Millisecond, 2*time.Millisecond
	c.locked.first, c.locked.max = time.Millisecond, 2*time.Millisecond
}
