package model

import "testing"

// TestCRMRound_idleMovesNoReadKey: a CRM round with no HA resource
// takes the State's lock only to read, so it moves no reader's key.
// It took it for writing, and the round the loop runs at Open, late on
// a loaded machine, moved the key under TestReadKey_movesWithWritesAndTheClockOnly.
func TestCRMRound_idleMovesNoReadKey(t *testing.T) {
	t.Parallel()
	k := newOpsKit(t)
	k.ct("pve", 101, nil)
	k1 := k.c.ReadKey()
	if actions, active := k.c.ha.crm.crmRound(); len(actions) != 0 || active {
		t.Fatalf("idle round: %d actions, active %v", len(actions), active)
	}
	if k.c.ReadKey() != k1 {
		t.Error("an idle CRM round moved the read key")
	}
}
