package cli

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/testutil/memcap"
)

// Issue 27: plan of the largest manifests that validate, up to the
// 4 MiB limit, allocates less than 256 MiB in all: corral and the
// in-process emulator it talks to together, so the figure bounds corral's
// from above. Measured, not timed; the time is logged.
func TestPlan_largestManifestsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("plans 4 MiB manifests")
	}
	memcap.SkipUnderRace(t)
	c := newCluster(t)
	head := "apps:\n  - name: web\n    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst\n"
	var apps strings.Builder
	apps.WriteString("apps:\n")
	for i := range 10_000 { // the most a manifest may hold
		fmt.Fprintf(&apps, "  - {name: a%d, template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst}\n", i)
	}
	for _, tc := range []struct{ name, yaml string }{
		{"one app, 4 MiB of tags", head + "    tags:\n" + strings.Repeat("      - "+strings.Repeat("y", 40)+"\n", (4<<20-len(head)-20)/49)},
		{"one app, a 4 MiB script", head + "    provision:\n      - run: |\n" + strings.Repeat("          echo yes\n", (4<<20-len(head)-40)/19)},
		{"10,000 apps", apps.String()},
		{"one app, 10,000 steps", head + "    provision:\n" + steps(10_000)},
		{"60 apps of 256 volumes", manyVolumes(60)},
		{"one app, 30,000 health checks", head + "    health:\n" + lines(30_000, "      - tcp: localhost:%d\n")},
		{"an envFile of 24,000 variables", head + "    provision:\n      - envFile:\n          path: /etc/app.env\n          env:\n" + lines(24_000, "            - {name: V%d, value: x}\n")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := writeManifestIn(t, "demo", tc.yaml) // its size as written
			var r result
			start := time.Now()
			n := memcap.Allocated(func() { r = c.run("plan", "-f", m) })
			t.Logf("%d KiB: exit %d, %d MiB allocated in %v", len(tc.yaml)>>10, r.code, n>>20, time.Since(start).Round(time.Millisecond))
			if r.code != ExitChanges { // the manifest must pass validation, or it tests nothing
				t.Fatalf("exit %d, want %d (changes): %.300s", r.code, ExitChanges, r.stderr)
			}
			if memcap.Over(n, memcap.Budget) {
				t.Errorf("plan allocated %d MiB, more than %d MiB", n>>20, memcap.Budget>>20)
			}
		})
	}
}

func steps(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "      - run: echo %d\n", i)
	}
	return b.String()
}

// manyVolumes is apps apps of 256 volumes each: 60 is about the most the
// raw-bytes scan's 100,000 values let through.
func manyVolumes(apps int) string {
	var b strings.Builder
	b.WriteString("apps:\n")
	for a := range apps {
		fmt.Fprintf(&b, "  - name: a%d\n    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst\n    volumes:\n", a)
		for i := range 256 {
			fmt.Fprintf(&b, "      - {name: v%d, size: 1G, mount: /v/%d}\n", i, i)
		}
	}
	return b.String()
}

// lines is n lines of format, each given its index.
func lines(n int, format string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, format, i%60000+1)
	}
	return b.String()
}
