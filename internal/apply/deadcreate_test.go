package apply_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/pvetest"
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
	t.Parallel()
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

// A placeholder whose create task corral cannot see (someone else's create
// under way, or none at all when PVE's API daemon died after writing it) is
// waited for; when the wait ends, the refusal gives root's command.
func TestUnseenCreateWaitedForThenExplained(t *testing.T) {
	t.Parallel()
	srv := pvetest.Start(t, pvetest.TimeScale(1.0)).Server
	// root's create runs for seconds at real durations; the operator token
	// cannot see root's task.
	if _, err := srv.Cluster().CreateCT(model.Auth{UserID: "root@pam"}, "pve", map[string]string{
		"vmid": "170", "ostemplate": "local:vztmpl/" + debian12, "rootfs": "local-lvm:1",
	}); err != nil {
		t.Fatal(err)
	}
	c := pvetest.Client(t, srv, srv.Credentials().OperatorToken)
	_, err := apply.ObserveWith(context.Background(), c, apply.ObserveOptions{CreateWait: 200 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "container(s) 170 on pve are still being created") ||
		!strings.Contains(err.Error(), "on node pve run pct unlock 170 && pct destroy 170") {
		t.Fatalf("want the wait's refusal with root's command, got %v", err)
	}
}
