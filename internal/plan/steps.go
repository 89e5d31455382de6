package plan

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/manifest"
)

// Step is one provisioning step as the planner sees it
// (GuestStep.Summary): its name, its checksum and its change triggers.
// Values are only in the checksum.
type Step struct {
	Name string
	Kind string
	// Sum is GuestStep.Sum of the step; "" when a reference it reads was not
	// resolved (a command that needs no provisioning values).
	Sum      string
	OnChange []string
	Restart  []string
}

// StepID is the key under which a step's checksum is recorded, in the
// guest and in the description: a short hash of its name (unique within
// the app), so that inserting or reordering steps reruns none of the
// others, and no name, which may be long or say too much, is stored.
func StepID(name string) string {
	h := sha256.Sum256([]byte(name))
	return hex.EncodeToString(h[:])[:stepIDLen]
}

const (
	stepIDLen   = 8  // hex characters of a step ID in the description
	stepSumLen  = 12 // hex characters of a checksum in the description
	markerSteps = "corral-steps: "
	// markerStopped records the step where the last apply's provisioning
	// stopped: "N/TOTAL ID why" (see Marker.Stopped).
	markerStopped = "corral-stopped: "
	// maxGuestDescription is how long an app's description may grow with
	// the steps line; past it the line is left out (PVE keeps at most
	// 8192 characters, and a plan then says the steps are compared in
	// the guest instead).
	maxGuestDescription = 8192 - 256
)

// StepsRecord renders the steps line's value: "id=sum id=sum …" with
// short forms of both, enough for a plan to tell a changed step from an
// unchanged one (a 48-bit checksum prefix; apply compares the full
// checksum kept in the guest).
func StepsRecord(steps []Step) string {
	var parts []string
	for _, s := range steps {
		if s.Sum == "" {
			return ""
		}
		parts = append(parts, StepID(s.Name)+"="+s.Sum[:stepSumLen])
	}
	return strings.Join(parts, " ")
}

// parseSteps reads a steps line's value.
func parseSteps(v string) map[string]string {
	out := map[string]string{}
	for _, f := range strings.Fields(v) {
		if id, sum, ok := strings.Cut(f, "="); ok {
			out[id] = sum
		}
	}
	return out
}

// RerunWhy is why a step named by --rerun runs.
const RerunWhy = "rerun requested"

// StepRun says whether an apply runs a step, and why.
type StepRun struct {
	Name string
	Run  bool
	// Why is the reason in words: "new step", "changed", "notified by
	// X", "new container", "unchanged", or why the plan cannot tell.
	Why string
	// Recreate: a compose step run because a step it names in onChange
	// ran; it recreates its services.
	Recreate bool
}

// UnitRestart is a systemd unit an apply restarts after the app's steps,
// and the steps that ask for it.
type UnitRestart struct {
	Unit    string
	Because []string
}

// planSteps says which steps of app a run, for a container that is new
// (fresh) or whose description is desc, and which units restart. known
// is false when the description holds no per-step record to compare
// with (a container provisioned by an older corral, or a record that did
// not fit) or a value was left unread: apply then compares in the guest.
func planSteps(a *App, desc string, fresh bool) (runs []StepRun, restarts []UnitRestart, known bool) {
	if len(a.GuestUnknown) > 0 || (!fresh && len(a.FactsUnknown) > 0) {
		return nil, nil, false
	}
	m := ParseMarker(desc)
	recorded := parseSteps(m.Steps)
	switch {
	case fresh:
	case m.Steps != "" || m.Stopped != nil:
	case m.Provisioned == a.GuestDigest && a.GuestDigest != "":
		// Provisioned before per-step records, and nothing changed.
		recorded = nil
	default:
		return nil, nil, false
	}
	runs, restarts = DecideSteps(a.Steps, fresh, func(s Step) string {
		if slices.Contains(a.Rerun, s.Name) {
			return RerunWhy
		}
		if recorded == nil {
			return ""
		}
		switch sum, ok := recorded[StepID(s.Name)]; {
		case m.Stopped != nil && m.Stopped.ID == StepID(s.Name):
			return "stopped here in the last apply"
		case !ok && m.Stopped != nil:
			return "not reached in the last apply"
		case !ok:
			return "new step"
		case !strings.HasPrefix(s.Sum, sum):
			return "changed"
		}
		return ""
	})
	return runs, restarts, true
}

// DecideSteps says which steps run and why, in order: a step runs when
// the container is new (fresh), when changed(step) gives a reason ("new
// step", "changed"), or when a step it names in onChange runs. Plan and
// apply both decide with it, plan against the description's record and
// apply against the guest's.
func DecideSteps(steps []Step, fresh bool, changed func(Step) string) ([]StepRun, []UnitRestart) {
	var runs []StepRun
	ran := map[string]bool{}
	because := map[string][]string{}
	var units []string
	for _, s := range steps {
		r := StepRun{Name: s.Name}
		if fresh {
			r.Run, r.Why = true, "new container"
		} else if why := changed(s); why != "" {
			r.Run, r.Why = true, why
		}
		for _, n := range s.OnChange {
			if !ran[n] || fresh {
				continue
			}
			if r.Run {
				r.Why += ", notified by " + n
			} else {
				r.Run, r.Why = true, "notified by "+n
			}
			// Compose recreates a service whose definition changed, but
			// not one whose env file did: force it, unless the services
			// were never brought up by this step.
			r.Recreate = s.Kind == string(manifest.StepCompose) && !strings.HasPrefix(r.Why, "new step")
			break
		}
		if !r.Run {
			r.Why = "unchanged"
		} else {
			ran[s.Name] = true
			for _, u := range s.Restart {
				if _, seen := because[u]; !seen {
					units = append(units, u)
				}
				because[u] = append(because[u], s.Name)
			}
		}
		runs = append(runs, r)
	}
	var restarts []UnitRestart
	for _, u := range units {
		restarts = append(restarts, UnitRestart{Unit: u, Because: because[u]})
	}
	return runs, restarts
}

// Stopped is where the last apply's provisioning stopped (a step
// failed): step N (from 1) of Total, the step's StepID and the error's
// first line (exit status, timeout; never the step's output).
type Stopped struct {
	N, Total int
	ID       string
	Why      string
}

// PartialStepsRecord is the steps record after steps[:i] finished and
// steps[i] failed: the steps before i with their current checksums, the
// others as prev (the last finished apply's record) had them.
func PartialStepsRecord(steps []Step, i int, prev string) string {
	old := parseSteps(prev)
	var parts []string
	for j, s := range steps {
		id := StepID(s.Name)
		switch {
		case j < i && len(s.Sum) >= stepSumLen:
			parts = append(parts, id+"="+s.Sum[:stepSumLen])
		case j >= i && old[id] != "":
			parts = append(parts, id+"="+old[id])
		}
	}
	return strings.Join(parts, " ")
}

// HealthStop is the step name StoppedMarker takes for a failed health
// check after every step finished.
const HealthStop = "health checks"

// StoppedMarker is the description line saying provisioning stopped at
// step i (from 0) of total, named name, because of err's text.
func StoppedMarker(i, total int, name, err string) string {
	why, _, _ := strings.Cut(err, "\n")
	why, _, _ = strings.Cut(why, "; last output:")
	if _, after, ok := strings.Cut(why, "step "+strconv.Quote(name)+" failed: "); ok {
		why = after
	}
	if k := strings.Index(why, "unhealthy after "); name == HealthStop && k >= 0 {
		why = why[k:] // without the "app: health: " the run's error starts with
	}
	if len(why) > 160 {
		why = why[:160] + "…"
	}
	return fmt.Sprintf("%s%d/%d %s %s\n", markerStopped, i+1, total, StepID(name), why)
}

func parseStopped(v string) *Stopped {
	f := strings.SplitN(strings.TrimSpace(v), " ", 3)
	if len(f) < 2 {
		return nil
	}
	ns, ts, ok := strings.Cut(f[0], "/")
	n, err1 := strconv.Atoi(ns)
	t, err2 := strconv.Atoi(ts)
	if !ok || err1 != nil || err2 != nil || n < 1 {
		return nil
	}
	st := &Stopped{N: n, Total: t, ID: f[1]}
	if len(f) == 3 {
		st.Why = f[2]
	}
	return st
}

// StoppedReason says where the last apply stopped and what the next one
// does, in words, for plan and status.
func StoppedReason(st *Stopped, steps []Step) string {
	if st.ID == StepID(HealthStop) {
		return fmt.Sprintf("the last apply ran all %d step(s) but a health check failed: %s; the next apply runs no finished step again, only what changed since, then checks health", st.Total, st.Why)
	}
	name := "a step since renamed or removed"
	for _, s := range steps {
		if StepID(s.Name) == st.ID {
			name = s.Name
		}
	}
	why := ""
	if st.Why != "" {
		why = ": " + st.Why
	}
	next := "the next apply runs it again and the steps after it"
	if st.N == st.Total {
		next = "the next apply runs it again"
	}
	return fmt.Sprintf("provisioning stopped at step %d of %d (%s) in the last apply%s; %s, then checks health (corral apply; corral logs APP shows the step's output)", st.N, st.Total, name, why, next)
}
