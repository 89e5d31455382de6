package manifest_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/manifest"
)

// Issue 27: a manifest with tens of thousands of problems reports the
// first manifest.MaxProblems by position and how many more there are,
// without building a message for each of the others.
func TestParse_problemsCapped(t *testing.T) {
	const apps = 9_000 // two problems each: template missing, unknown key
	var b strings.Builder
	b.WriteString("apps:\n")
	for i := range apps {
		fmt.Fprintf(&b, "  - name: a%d\n    bogus%d: 1\n", i, i)
	}
	var err error
	bytes := allocated(func() { _, err = manifest.Parse("corral.yaml", []byte(b.String()), manifest.LoadOptions{}) })
	var d *manifest.Diagnostics
	if !errors.As(err, &d) {
		t.Fatalf("err = %v, want *manifest.Diagnostics", err)
	}
	if got, want := len(d.Items), manifest.MaxProblems; got != want {
		t.Fatalf("len(Items) = %d, want %d", got, want)
	}
	if got, want := d.More, 2*apps-manifest.MaxProblems; got != want {
		t.Errorf("More = %d, want %d", got, want)
	}
	// The first by position: line 2 holds apps[0], its bogus key is on line 3.
	if got, want := d.Items[0].Pos.Line, 2; got != want {
		t.Errorf("first problem on line %d, want %d: %v", got, want, d.Items[0])
	}
	if last := d.Items[len(d.Items)-1]; last.Pos.Line > 2*apps/100 {
		t.Errorf("last kept problem on line %d, not among the first: %v", last.Pos.Line, last)
	}
	lines := strings.Split(err.Error(), "\n")
	if got, want := len(lines), manifest.MaxProblems+1; got != want {
		t.Fatalf("%d lines, want %d", got, want)
	}
	if got, want := lines[len(lines)-1], fmt.Sprintf("… and %d more problems (fix these, then run corral validate again for the rest)", 2*apps-manifest.MaxProblems); got != want {
		t.Errorf("last line %q, want %q", got, want)
	}
	// The parse itself (yaml.v3's nodes for 60,000 values) takes most of
	// this; 60,000 messages with the allowed keys would take far more.
	if bytes > 256<<20 {
		t.Errorf("parsing allocated %d MiB", bytes>>20)
	}
}

// Exactly MaxProblems problems: all reported, no "more" line.
func TestParse_problemsAtCap(t *testing.T) {
	var b strings.Builder
	b.WriteString("apps:\n  - name: a\n    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst\n")
	for i := range manifest.MaxProblems {
		fmt.Fprintf(&b, "    bogus%d: 1\n", i)
	}
	_, err := manifest.Parse("corral.yaml", []byte(b.String()), manifest.LoadOptions{})
	var d *manifest.Diagnostics
	if !errors.As(err, &d) {
		t.Fatalf("err = %v, want *manifest.Diagnostics", err)
	}
	if len(d.Items) != manifest.MaxProblems || d.More != 0 || strings.Contains(err.Error(), "more problems") {
		t.Fatalf("len(Items)=%d More=%d, want %d and 0; %v", len(d.Items), d.More, manifest.MaxProblems, err)
	}
}

// Issue 27: a manifest holds at most 10,000 apps (planning the 24,900
// the raw-bytes scan lets through took more than 256 MiB); more is one
// problem, found before anything is built for them.
func TestParse_tooManyApps(t *testing.T) {
	t.Parallel() // measures no allocation: it may overlap the other parallel tests
	for _, tc := range []struct {
		apps int
		ok   bool
	}{{10_000, true}, {10_001, false}} {
		var b strings.Builder
		b.WriteString("apps:\n")
		for i := range tc.apps {
			fmt.Fprintf(&b, "  - {name: a%d, template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst}\n", i)
		}
		_, err := manifest.Parse("corral.yaml", []byte(b.String()), manifest.LoadOptions{})
		if tc.ok && err != nil {
			t.Errorf("%d apps: %.300v", tc.apps, err)
		}
		if !tc.ok && (err == nil || err.Error() != "corral.yaml:2:3: apps: holds 10001 items, more than the 10000 corral takes") {
			t.Errorf("%d apps: %.300v", tc.apps, err)
		}
	}
}

// Issue 27: at most 256 volumes per app (PVE's mp0…mp255) and 10,000
// provision steps in all (planning 45,000 took more than 256 MiB).
func TestParse_volumeAndStepLimits(t *testing.T) {
	app := func(name, body string) string {
		return "  - name: " + name + "\n    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst\n" + body
	}
	vols := func(n int) string {
		var b strings.Builder
		b.WriteString("    volumes:\n")
		for i := range n {
			fmt.Fprintf(&b, "      - {name: v%d, size: 1G, mount: /v/%d}\n", i, i)
		}
		return b.String()
	}
	steps := func(n int) string {
		var b strings.Builder
		b.WriteString("    provision:\n")
		for i := range n {
			fmt.Fprintf(&b, "      - run: echo %d\n", i)
		}
		return b.String()
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"256 volumes", app("a", vols(256)), ""},
		{"257 volumes", app("a", vols(257)), "corral.yaml:5:7: apps[0].volumes: holds 257 items, more than the 256 corral takes"},
		{"10,000 steps in two apps", app("a", steps(5_000)) + app("b", steps(5_000)), ""},
		{"10,001 steps in two apps", app("a", steps(5_000)) + app("b", steps(5_001)), "corral.yaml:2:3: apps: the apps hold 10001 provision steps in all, more than the 10000 corral takes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := manifest.Parse("corral.yaml", []byte("apps:\n"+tc.yaml), manifest.LoadOptions{})
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Fatalf("Parse() = %.300q, want %q", got, tc.want)
			}
		})
	}
}
