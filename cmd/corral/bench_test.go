package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestBenchJSON runs `corral bench` on one app at time scale 0.01 through
// the binary (its own emulator process, corral as subprocesses) and checks
// that -o json carries every step with sane figures. It asserts no time.
func TestBenchJSON(t *testing.T) {
	t.Parallel()
	code, out, errs := corral(t, nil, "bench", "--apps", "1", "--time-scale", "0.01", "-o", "json")
	if code != 0 {
		t.Fatalf("corral bench: exit %d\n%s\n%s", code, out, errs)
	}
	var r struct {
		Machine struct {
			CPUs int `json:"cpus"`
		} `json:"machine"`
		Runs []struct {
			Tool      string  `json:"tool"`
			Apps      int     `json:"apps"`
			TimeScale float64 `json:"time_scale"`
			Steps     []struct {
				Name           string   `json:"name"`
				Wall           *float64 `json:"wall_s"`
				CriticalPath   *float64 `json:"critical_path_s"`
				TaskTime       *float64 `json:"task_time_s"`
				Overhead       *float64 `json:"overhead"`
				Tasks          *int     `json:"tasks"`
				Requests       *int     `json:"requests"`
				RequestsPerApp *float64 `json:"requests_per_app"`
			} `json:"steps"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("bench -o json: %v\n%s", err, out)
	}
	if r.Machine.CPUs < 1 {
		t.Errorf("machine.cpus = %d", r.Machine.CPUs)
	}
	if len(r.Runs) != 1 || r.Runs[0].Tool != "corral" || r.Runs[0].Apps != 1 || r.Runs[0].TimeScale != 0.01 {
		t.Fatalf("runs = %+v, want one corral run of 1 app at time scale 0.01", r.Runs)
	}
	// Which steps cause Proxmox tasks: apply creates the keeper and the
	// app's container and starts it; destroy stops and destroys the
	// container; the no-op steps cause none.
	want := []struct {
		name  string
		tasks int
	}{{"apply", 3}, {"noop-plan", 0}, {"noop-apply", 0}, {"destroy", 2}}
	steps := r.Runs[0].Steps
	if len(steps) != len(want) {
		t.Fatalf("%d steps, want %d: %s", len(steps), len(want), out)
	}
	for i, w := range want {
		s := steps[i]
		if s.Wall == nil || s.CriticalPath == nil || s.TaskTime == nil || s.Overhead == nil || s.Tasks == nil || s.Requests == nil || s.RequestsPerApp == nil {
			t.Fatalf("step %d lacks a field: %s", i, out)
		}
		if s.Name != w.name || *s.Tasks != w.tasks {
			t.Errorf("step %d: %s with %d tasks, want %s with %d", i, s.Name, *s.Tasks, w.name, w.tasks)
		}
		if *s.Wall <= 0 || *s.Requests <= 0 || *s.RequestsPerApp != float64(*s.Requests) {
			t.Errorf("%s: wall %v s, %d requests, %v per app", s.Name, *s.Wall, *s.Requests, *s.RequestsPerApp)
		}
		if w.tasks == 0 {
			if *s.CriticalPath != 0 || *s.Overhead != 0 {
				t.Errorf("%s: critical path %v, overhead %v without tasks", s.Name, *s.CriticalPath, *s.Overhead)
			}
			continue
		}
		// The critical path is made of the step's tasks, which ran
		// inside the command's wall time.
		if *s.CriticalPath <= 0 || *s.CriticalPath > *s.TaskTime || *s.CriticalPath > *s.Wall {
			t.Errorf("%s: critical path %v s, task time %v s, wall %v s", s.Name, *s.CriticalPath, *s.TaskTime, *s.Wall)
		}
		if *s.Overhead != *s.Wall / *s.CriticalPath {
			t.Errorf("%s: overhead %v != wall/critical path %v", s.Name, *s.Overhead, *s.Wall / *s.CriticalPath)
		}
	}
}

// With --provision, apply logs into the container, and the wait for its
// sshd (the emulator's boot delay, 5 s at time scale 1) is part of the
// critical path, so the overhead stays what corral adds.
func TestBenchProvisionCountsTheBoot(t *testing.T) {
	t.Parallel()
	code, out, errs := corral(t, nil, "bench", "--apps", "1", "--time-scale", "0.01", "--provision", "-o", "json")
	if code != 0 {
		t.Fatalf("corral bench --provision: exit %d\n%s\n%s", code, out, errs)
	}
	var r struct {
		Runs []struct {
			Provision bool `json:"provision"`
			Steps     []struct {
				Name         string  `json:"name"`
				Wall         float64 `json:"wall_s"`
				CriticalPath float64 `json:"critical_path_s"`
				TaskTime     float64 `json:"task_time_s"`
			} `json:"steps"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("bench -o json: %v\n%s", err, out)
	}
	if len(r.Runs) != 1 || !r.Runs[0].Provision || r.Runs[0].Steps[0].Name != "apply" {
		t.Fatalf("runs: %s", out)
	}
	apply := r.Runs[0].Steps[0]
	// The app's create and start are on the critical path with the boot
	// after the start (the keeper is created beside the app, so its task
	// is not: internal/bench's TestCriticalPath_keeperBeforeOrBeside
	// checks the rule and the boot); the path is never longer than the
	// tasks plus the boot, nor than the wall.
	if apply.CriticalPath <= 0.05 || apply.CriticalPath > apply.TaskTime+0.05+1e-6 || apply.CriticalPath > apply.Wall {
		t.Errorf("apply: critical path %v s, task time %v s (boot 0.05 s), wall %v s", apply.CriticalPath, apply.TaskTime, apply.Wall)
	}
}

// corral bench --drain: the drain of a node with two apps (two volumes
// each) onto the other two of three, measured through the CLI, with its
// critical path from the emulator's tasks.
func TestBenchDrainJSON(t *testing.T) {
	t.Parallel()
	code, out, errs := corral(t, nil, "bench", "--drain", "2", "--time-scale", "0.01", "--parallelism", "2", "-o", "json")
	if code != 0 {
		t.Fatalf("corral bench --drain: exit %d\n%s\n%s", code, out, errs)
	}
	var r struct {
		Runs  []json.RawMessage `json:"runs"`
		Drain *struct {
			Apps        int     `json:"apps"`
			Nodes       int     `json:"nodes"`
			TimeScale   float64 `json:"time_scale"`
			Parallelism int     `json:"parallelism"`
			Wall        float64 `json:"wall_s"`
			Critical    float64 `json:"critical_path_s"`
			Chain       float64 `json:"chain_s"`
			Keeper      float64 `json:"keeper_s"`
			Packed      float64 `json:"packed_s"`
			TaskTime    float64 `json:"task_time_s"`
			Tasks       int     `json:"tasks"`
			Ratio       float64 `json:"wall_over_critical"`
			Requests    int     `json:"requests"`
		} `json:"drain"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("bench --drain -o json: %v\n%s", err, out)
	}
	d := r.Drain
	if d == nil || len(r.Runs) != 0 {
		t.Fatalf("want only a drain report:\n%s", out)
	}
	if d.Apps != 2 || d.Nodes != 3 || d.TimeScale != 0.01 || d.Parallelism != 2 {
		t.Errorf("drain run = %+v", *d)
	}
	// Per app: its shutdown, both migrations, its start; the carrier's
	// create and destroy; four move_volume tasks (two in, two out). And
	// the keepers' creates on pve2 and pve3 (placement spreads the two
	// apps; neither node had a keeper).
	if d.Tasks != 2*10+2 {
		t.Errorf("drain tasks = %d, want 22 (10 per app, 2 keepers)", d.Tasks)
	}
	// One app's chain at time scale 0.01: shutdown 0.04 s, migrate 0.08
	// s, start 0.03 s; its carrier's create 0.11 s, four moves 0.02 s
	// each, migrate 0.08 s, destroy 0.02 s.
	if want := 0.04 + 0.08 + 0.03 + 0.11 + 4*0.02 + 0.08 + 0.02; d.Chain < want-0.001 || d.Chain > want+0.001 {
		t.Errorf("chain = %v s, want %v s", d.Chain, want)
	}
	if d.Critical != max(d.Chain, d.Keeper, d.Packed) || d.Critical > d.Wall || d.Ratio < 1 || d.Requests == 0 {
		t.Errorf("drain figures = %+v", *d)
	}
	code, out, errs = corral(t, nil, "bench", "--drain", "1", "--time-scale", "0")
	if code != 0 || !strings.Contains(out, "drain of a node with 1 apps") || !strings.Contains(out, "WALL/CRITICAL") {
		t.Fatalf("corral bench --drain (text): exit %d\n%s\n%s", code, out, errs)
	}
}
