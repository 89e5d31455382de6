package model

import (
	"testing"
	"time"
)

// The read key moves with every change of the State and with the
// clock's second, and with nothing that only reads: the guest layer's
// writes into a running CT's rootfs (WithRunningGuest) change no State,
// and moved it for every sshd start (a thousand after an apply), which
// emptied the HTTP layer's cache of answers again and again.
func TestReadKey_movesWithWritesAndTheClockOnly(t *testing.T) {
	t.Parallel()
	now := time.Unix(1777629600, 0)
	k := newOpsKitWith(t, Options{Now: func() time.Time { return now }})
	k.ct("pve", 101, nil)
	k.edit(101, func(g *Guest) { g.Running, g.PID, g.StartedAt = true, 4242, now.Unix() })
	k1 := k.c.ReadKey()
	if k.c.Resources("vm"); k.c.ReadKey() != k1 {
		t.Fatal("a read moved the key")
	}
	ran, err := k.c.WithRunningGuest(101, 4242, func() error { return nil })
	if !ran || err != nil {
		t.Fatalf("WithRunningGuest: %v %v", ran, err)
	}
	if k.c.ReadKey() != k1 {
		t.Error("WithRunningGuest, which changes no State, moved the key")
	}
	if err := k.c.UpdateCTConfig(kitRoot, "pve", 101, map[string]string{"description": "x"}); err != nil {
		t.Fatal(err)
	}
	k2 := k.c.ReadKey()
	if k2 == k1 || !k2.After(k1) || k1.After(k2) {
		t.Errorf("a config write: key %+v then %+v", k1, k2)
	}
	now = now.Add(time.Second)
	if k3 := k.c.ReadKey(); k3 == k2 || !k3.After(k2) {
		t.Errorf("a second later: key %+v then %+v", k2, k3)
	}
}
