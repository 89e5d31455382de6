package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/agent"
	"github.com/corralhq/corral/internal/sim"
	"github.com/corralhq/corral/internal/testenv"
)

// nextArchiveSecond waits until the wall clock is past the second of
// the newest backup archive on c's emulator: archive names
// (vzdump-lxc-<vmid>-<time>) have one-second resolution, so a backup in
// that same second would reuse the name, as on PVE. It does not wait at
// all when that second is already past.
func (c *cluster) nextArchiveSecond() {
	c.t.Helper()
	var newest int64
	cl := c.srv.Cluster()
	for _, n := range cl.Nodes() {
		storages, err := cl.Storages(n.Node)
		if err != nil {
			continue // an offline node
		}
		for _, s := range storages {
			entries, err := cl.Content(n.Node, s.Storage.ID, "backup", 0)
			if err != nil {
				continue
			}
			for _, e := range entries {
				newest = max(newest, e.Ctime)
			}
		}
	}
	testenv.WaitFor(c.t, "a second later than the newest archive's", func() bool { return time.Now().Unix() > newest })
}

func (c *cluster) archives(m, app string) []string {
	c.t.Helper()
	r := c.mustC("backups", app, "-f", m, "-o", "json")
	var list struct {
		Backups []struct {
			VolID  string `json:"volid"`
			Corral bool   `json:"corral"`
		} `json:"backups"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		c.t.Fatal(err)
	}
	var out []string
	for _, b := range list.Backups {
		out = append(out, b.VolID)
	}
	return out
}

// Scheduled backups at a fast time scale (a day a step): one per window,
// none twice in a window even across an agent restart, keep pruning, and a
// failed vzdump task reported as failed (event, metric, API).
func TestAgent_scheduledBackups(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := writeManifest(t, strings.ReplaceAll(appManifest, "MEMORY", "512")+`    backup:
      keep: 2
      schedule: "@every 24h"
`)
	c.mustRun("apply", "-f", m, "--auto-approve")
	start := time.Now()
	r := c.newAgentRig(m, "observe", start, nil)
	r.tick()
	if got := c.archives(m, "notes"); len(got) != 1 {
		t.Fatalf("archives after the first round = %v, want 1\n%s", got, r.stderr)
	}
	ev := r.events(agent.KindBackup, 0)
	if len(ev) != 1 || ev[0].Level != "info" || !strings.Contains(ev[0].Message, "vzdump-lxc-") {
		t.Fatalf("backup events: %+v", ev)
	}
	if b := r.app("notes").LastBackup; b == nil || !b.OK || r.metric("corral_agent_backup_last_success", "app", "notes") != 1 ||
		r.metric("corral_agent_backups_total", "app", "notes", "result", "ok") != 1 {
		t.Errorf("after the first backup: %+v", b)
	}
	// Later in the same window (UTC days, for @every 24h): nothing.
	dayEnd := start.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	r.clock.Add(dayEnd.Sub(start) / 2)
	r.tick()
	if got := c.archives(m, "notes"); len(got) != 1 {
		t.Fatalf("second backup in the same window: %v", got)
	}

	// A restarted agent in the same window finds the archive and takes
	// none, and shows it as the last backup.
	r2 := c.newAgentRig(m, "observe", start, nil)
	r2.tick()
	if got := c.archives(m, "notes"); len(got) != 1 || len(r2.events(agent.KindBackup, 0)) != 0 {
		t.Fatalf("restarted agent backed up again in the same window: %v %+v", got, r2.events(agent.KindBackup, 0))
	}
	if b := r2.app("notes").LastBackup; b == nil || !b.OK || b.Archive == "" {
		t.Errorf("restarted agent's last backup = %+v", b)
	}

	// Next windows: a backup each, pruned to keep 2.
	var made []string
	for day := 1; day <= 3; day++ {
		c.nextArchiveSecond()
		r.clock.Add(24 * time.Hour)
		r.tick()
		b := r.app("notes").LastBackup
		if b == nil || !b.OK {
			t.Fatalf("day %d: %+v\n%+v", day, b, r.events("", 0))
		}
		made = append(made, b.Archive)
		if got := c.archives(m, "notes"); len(got) != 2 || got[0] != b.Archive {
			t.Errorf("day %d: archives %v, want the newest 2 (newest %s)", day, got, b.Archive)
		}
	}
	if !hasEvent(r.events(agent.KindBackup, 0), "notes", "pruned") {
		t.Errorf("no backup event names what was pruned: %+v", r.events(agent.KindBackup, 0))
	}

	// A failed vzdump task is a failed backup.
	seq := r.lastSeq()
	c.srv.SetFaults(sim.FaultSpec{TaskFail: 1})
	c.nextArchiveSecond()
	r.clock.Add(24 * time.Hour)
	r.tick()
	c.srv.SetFaults(sim.FaultSpec{})
	failed := r.events(agent.KindBackup, seq)
	if len(failed) != 1 || failed[0].Level != "error" || !strings.Contains(failed[0].Message, "FAILED") || !strings.Contains(failed[0].Message, "injected fault") {
		t.Fatalf("failed backup events: %+v", failed)
	}
	if b := r.app("notes").LastBackup; b == nil || b.OK || b.Error == "" {
		t.Errorf("last backup after the failure = %+v", b)
	}
	if r.metric("corral_agent_backups_total", "app", "notes", "result", "failed") != 1 || r.metric("corral_agent_backup_last_success", "app", "notes") != 0 {
		t.Errorf("failure metrics: failed=%v last_success=%v", r.metric("corral_agent_backups_total", "app", "notes", "result", "failed"),
			r.metric("corral_agent_backup_last_success", "app", "notes"))
	}
	// The age of the newest good backup goes on growing.
	if age := r.metric("corral_agent_backup_last_success_age_seconds", "app", "notes"); age != (24 * time.Hour).Seconds() {
		t.Errorf("last good backup age = %v s, want a day", age)
	}
	if got := c.archives(m, "notes"); len(got) != 2 || got[0] != made[2] {
		t.Errorf("archives after the failed backup: %v", got)
	}
	// Not retried every round in that window: a round later in the same
	// UTC day, half way to its end (an hour later crossed midnight, into
	// the next window, when the test ran after about 22:00 UTC).
	now := r.clock.Now()
	r.clock.Add(now.UTC().Truncate(24*time.Hour).Add(24*time.Hour).Sub(now) / 2)
	r.tick()
	if n := len(r.events(agent.KindBackup, seq)); n != 1 {
		t.Errorf("failed backup retried within its window: %d events", n)
	}
}
