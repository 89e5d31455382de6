package plan

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPlanSteps(t *testing.T) {
	steps := []Step{
		{Name: "tools", Kind: "run", Sum: strings.Repeat("a", 64)},
		{Name: "env", Kind: "envFile", Sum: strings.Repeat("b", 64), Restart: []string{"app.service"}},
		{Name: "conf", Kind: "file", Sum: strings.Repeat("c", 64), Restart: []string{"app.service", "web.service"}},
		{Name: "compose", Kind: "compose", Sum: strings.Repeat("d", 64), OnChange: []string{"env"}},
		{Name: "reload", Kind: "run", Sum: strings.Repeat("e", 64), OnChange: []string{"conf"}},
	}
	a := &App{Name: "app", Steps: steps, GuestDigest: "digest"}
	record := func(sums map[string]string) string {
		var s []Step
		for _, st := range steps {
			if sum, ok := sums[st.Name]; ok {
				st.Sum = sum
				s = append(s, st)
			}
		}
		return WithGuestRecord("", "", "old", StepsRecord(s))
	}
	all := map[string]string{"tools": steps[0].Sum, "env": steps[1].Sum, "conf": steps[2].Sum, "compose": steps[3].Sum, "reload": steps[4].Sum}
	with := func(k, v string) map[string]string {
		m := map[string]string{}
		for n, s := range all {
			m[n] = s
		}
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	type row struct {
		name string
		why  string
	}
	tests := []struct {
		name     string
		desc     string
		fresh    bool
		rerun    []string
		want     []row // steps that run
		restarts map[string][]string
		unknown  bool
	}{
		{name: "nothing changed", desc: record(all)},
		{name: "env changed: compose recreates, app restarts", desc: record(with("env", strings.Repeat("0", 64))),
			want:     []row{{"env", "changed"}, {"compose", "notified by env"}},
			restarts: map[string][]string{"app.service": {"env"}}},
		{name: "conf changed: reload, two units", desc: record(with("conf", strings.Repeat("0", 64))),
			want:     []row{{"conf", "changed"}, {"reload", "notified by conf"}},
			restarts: map[string][]string{"app.service": {"conf"}, "web.service": {"conf"}}},
		{name: "new step", desc: record(with("tools", "")), want: []row{{"tools", "new step"}}},
		{name: "new container", fresh: true,
			want:     []row{{"tools", "new container"}, {"env", "new container"}, {"conf", "new container"}, {"compose", "new container"}, {"reload", "new container"}},
			restarts: map[string][]string{"app.service": {"env", "conf"}, "web.service": {"conf"}}},
		{name: "rerun", desc: record(all), rerun: []string{"env"},
			want:     []row{{"env", RerunWhy}, {"compose", "notified by env"}},
			restarts: map[string][]string{"app.service": {"env"}}},
		{name: "no per-step record, digest differs", desc: WithGuestRecord("", "", "old", ""), unknown: true},
		{name: "no per-step record, digest matches", desc: WithGuestRecord("", "", "digest", "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := *a
			a.Rerun = tt.rerun
			runs, restarts, known := planSteps(&a, tt.desc, tt.fresh)
			if known == tt.unknown {
				t.Fatalf("known = %v", known)
			}
			var got []row
			for _, r := range runs {
				if r.Run {
					got = append(got, row{r.Name, r.Why})
				}
			}
			if d := cmp.Diff(tt.want, got, cmp.AllowUnexported(row{})); d != "" {
				t.Errorf("steps that run (-want +got):\n%s", d)
			}
			gotR := map[string][]string{}
			for _, r := range restarts {
				gotR[r.Unit] = r.Because
			}
			if tt.restarts == nil {
				tt.restarts = map[string][]string{}
			}
			if d := cmp.Diff(tt.restarts, gotR); d != "" {
				t.Errorf("restarts (-want +got):\n%s", d)
			}
			for _, r := range runs {
				if r.Recreate != (r.Name == "compose" && strings.HasPrefix(r.Why, "notified")) {
					t.Errorf("%s: Recreate %v (%s)", r.Name, r.Recreate, r.Why)
				}
			}
		})
	}
}

// TestDescriptionRecord: the steps line fits PVE's limit or is left out,
// and a plan's description diff shows none of corral's lines.
func TestDescriptionRecord(t *testing.T) {
	var steps []Step
	for i := range 100 {
		steps = append(steps, Step{Name: strings.Repeat("x", i+1), Sum: strings.Repeat("f", 64)})
	}
	user := "the app's notes\nsecond line"
	desc := WithGuestRecord(AppDescription(App{Name: "web", Template: "local:vztmpl/t.tar.zst", Description: user}), "ssh-ed25519 AAAA", "d1", StepsRecord(steps))
	if len(desc) > 8192 || ParseMarker(desc).Steps == "" {
		t.Fatalf("100 steps: %d characters, steps line %q", len(desc), ParseMarker(desc).Steps)
	}
	if got := UserDescription(desc); got != user {
		t.Errorf("UserDescription = %q", got)
	}
	long := strings.Repeat("y", 7600)
	desc = WithGuestRecord(AppDescription(App{Name: "web", Template: "local:vztmpl/t.tar.zst", Description: long}), "ssh-ed25519 AAAA", "d1", StepsRecord(steps))
	if len(desc) > 8192 || ParseMarker(desc).Steps != "" || ParseMarker(desc).Provisioned != "d1" {
		t.Errorf("a long description: %d characters, marker %+v", len(desc), ParseMarker(desc))
	}
	// Replacing keeps the steps line unless told otherwise.
	if m := ParseMarker(WithGuestMarkers(WithGuestRecord("", "k", "d", "ab=cd"), "k2", "d2")); m.Steps != "ab=cd" || m.HostKey != "k2" {
		t.Errorf("WithGuestMarkers dropped the steps line: %+v", m)
	}
}
