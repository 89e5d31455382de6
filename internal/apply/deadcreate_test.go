package apply_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/sim/model"
)

// deadRestore is the refusal for a restore whose worker died at its start:
// like a dead create, it names the task and root's one command.
var deadRestore = regexp.MustCompile(`^the restore of CT (\d+) on pve failed \(task UPID:[^ ]+:vzrestore:\d+:corral@pve!corral: ended: injected fault: task vzrestore \d+ failed\) and left the half-made container locked \(lock: create\); .*on node pve run pct unlock (\d+) && pct destroy (\d+); then run corral again$`)

// A restore whose worker dies leaves the same "lock: create" placeholder
// as a create does, but its task is a vzrestore: the next run must say so
// at once instead of waiting out the whole create wait (issue 11,
// scenario 14; the soak stalled three minutes on exactly this).
func TestDeadRestorePlaceholderReportedAtOnce(t *testing.T) {
	r := newRig(t)
	ph := cycle[0]
	if _, err := r.run(ph, 0); err != nil {
		t.Fatal(err)
	}
	archive := r.backup()
	r.srv.Cluster().SetTaskHook(func(typ, id string) error {
		if typ == "vzrestore" {
			return model.Failf("injected fault: task %s %s failed\n", typ, id)
		}
		return nil
	})
	if _, err := r.restoreReplace(archive, 0); err == nil {
		t.Fatal("restore --replace succeeded with its task failing")
	}
	r.srv.Cluster().SetTaskHook(nil)

	// A create wait far longer than the test may run: only an answer at
	// once passes.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := apply.ObserveWith(ctx, r.client(nil), apply.ObserveOptions{CreateWait: time.Hour})
	if err == nil {
		t.Fatal("observe planned around a dead restore placeholder")
	}
	m := deadRestore.FindStringSubmatch(err.Error())
	if m == nil || m[1] != m[2] || m[2] != m[3] {
		t.Fatalf("error does not explain the dead restore: %v", err)
	}
}
