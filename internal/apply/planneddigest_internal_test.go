package apply

import "testing"

// TestPlannedDigest: a plan made while a backup or a snapshot held the
// container (lock: backup) is not stale once the lock goes, but any other
// change of a current or pending value is.
func TestPlannedDigest(t *testing.T) {
	conf := map[string]string{"memory": "512", "mp0": "local-lvm:vm-100-disk-1,mp=/srv"}
	base := plannedDigest(conf, nil)
	locked := plannedDigest(map[string]string{"memory": "512", "mp0": "local-lvm:vm-100-disk-1,mp=/srv", "lock": "backup"}, nil)
	if locked != base {
		t.Errorf("the lock changed the digest")
	}
	for name, d := range map[string]string{
		"a value":         plannedDigest(map[string]string{"memory": "1024", "mp0": conf["mp0"]}, nil),
		"a key":           plannedDigest(map[string]string{"memory": "512"}, nil),
		"a pending value": plannedDigest(conf, map[string]string{"mp0": ""}),
		"current→pending": plannedDigest(map[string]string{"mp0": conf["mp0"]}, map[string]string{"memory": "512"}),
	} {
		if d == base {
			t.Errorf("%s changed and the digest did not", name)
		}
	}
}
