package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// Shell completion offers the manifest's app names (issue 16, item 15).
func TestCompleteAppNames(t *testing.T) {
	t.Parallel()
	m := writeManifest(t, threeVolumes("alpha")+strings.TrimPrefix(threeVolumes("beta"), "apps:\n"))
	over := writeOverride(t, threeVolumes("gamma"))
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"__complete", "logs", "-f", m, ""}, []string{"alpha", "beta"}},
		{[]string{"__complete", "backup", "-f", m, "al"}, []string{"alpha"}},
		{[]string{"__complete", "rescue", "-f", m, "be"}, []string{"beta"}},
		{[]string{"__complete", "destroy", "-f", m, "alpha", ""}, []string{"beta"}},
		{[]string{"__complete", "rollback", "-f", m, "alpha", ""}, nil},
		// An override file's new app is the merged manifest's too.
		{[]string{"__complete", "logs", "-f", m, "-f", over, ""}, []string{"alpha", "beta", "gamma"}},
	} {
		var out, errb bytes.Buffer
		Run(context.Background(), tc.args, strings.NewReader(""), &out, &errb)
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			if line != "" && !strings.HasPrefix(line, ":") {
				got = append(got, line)
			}
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%v: got %v, want %v\n%s", tc.args, got, tc.want, out.String())
		}
	}
}

// TestCompleteClusterResources: completion reads the cluster the flags
// name for volume ids (volumes rm), archives (restore --archive) and
// snapshot names (rollback, snapshot --delete), prints no error on
// stderr, and offers nothing (quietly) when the cluster cannot be read.
func TestCompleteClusterResources(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := manifestWith(t, "512")
	c.mustRun("apply", "-f", m, "--auto-approve")
	c.runC("snapshot", "notes", "before-upgrade", "-f", m)
	c.runC("backup", "notes", "-f", m)
	var st statusJSON
	if err := json.Unmarshal([]byte(c.mustRun("status", "-f", m, "-o", "json").stdout), &st); err != nil {
		t.Fatal(err)
	}
	var vols []string
	for _, v := range st.Apps[0].Volumes {
		vols = append(vols, v.VolID)
	}
	sort.Strings(vols)
	var backups struct {
		Backups []struct {
			VolID string `json:"volid"`
		} `json:"backups"`
	}
	json.Unmarshal([]byte(c.runC("backups", "-o", "json").stdout), &backups)
	if len(backups.Backups) != 1 {
		t.Fatalf("backups: %+v", backups)
	}
	conn := c.connArgs()
	complete := func(args ...string) ([]string, string) {
		var out, errb bytes.Buffer
		// The connection flags go before -f, which every case has.
		i := slices.Index(args, "-f")
		full := append(append(append([]string{"__complete"}, args[:i]...), conn...), args[i:]...)
		Run(context.Background(), full, strings.NewReader(""), &out, &errb)
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			if line != "" && !strings.HasPrefix(line, ":") {
				got = append(got, line)
			}
		}
		sort.Strings(got)
		return got, errb.String()
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"volumes", "rm", "-f", m, ""}, vols},
		{[]string{"volumes", "rm", "-f", m, vols[0], ""}, vols[1:]},
		{[]string{"restore", "notes", "-f", m, "--archive", ""}, []string{backups.Backups[0].VolID}},
		{[]string{"rollback", "-f", m, ""}, []string{"notes"}},
		{[]string{"rollback", "notes", "-f", m, ""}, []string{"before-upgrade"}},
		{[]string{"rollback", "notes", "-f", m, "x"}, nil},
		{[]string{"snapshot", "notes", "--delete", "-f", m, ""}, []string{"before-upgrade"}},
		{[]string{"snapshot", "notes", "-f", m, ""}, nil}, // a new name: nothing to offer
	} {
		got, stderr := complete(tc.args...)
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%v: got %v, want %v", tc.args, got, tc.want)
		}
		if strings.Contains(stderr, "Error") || strings.Contains(stderr, "corral:") {
			t.Errorf("%v: completion printed on stderr:\n%s", tc.args, stderr)
		}
	}

	// A cluster that cannot be reached: no candidates, no error.
	var out, errb bytes.Buffer
	code := Run(context.Background(), []string{"__complete", "volumes", "rm", "--endpoint", "https://127.0.0.1:1", "--api-token", "a@pve!b=c", ""}, strings.NewReader(""), &out, &errb)
	if code != 0 || strings.Contains(errb.String(), "Error") || strings.TrimSpace(strings.Split(out.String(), ":")[0]) != "" {
		t.Errorf("unreachable cluster: exit %d\nstdout %q\nstderr %q", code, out.String(), errb.String())
	}
}

// TestCompletionTimeout: a completion gives up after 3 s unless
// CORRAL_COMPLETION_TIMEOUT says otherwise, and one that runs out offers
// nothing, quietly. Serial: it sets the variable for the process.
func TestCompletionTimeout(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want time.Duration
	}{{"", 3 * time.Second}, {"10s", 10 * time.Second}, {"soon", 3 * time.Second}, {"-1s", 3 * time.Second}} {
		t.Setenv("CORRAL_COMPLETION_TIMEOUT", tc.env)
		if got := completionTimeout(); got != tc.want {
			t.Errorf("CORRAL_COMPLETION_TIMEOUT=%q: %v, want %v", tc.env, got, tc.want)
		}
	}
	c := newCluster(t)
	m := manifestWith(t, "512")
	c.mustRun("apply", "-f", m, "--auto-approve")
	args := append(append([]string{"__complete", "volumes", "rm"}, c.connArgs()...), "-f", m, "")
	complete := func() (string, string) {
		var out, errb bytes.Buffer
		Run(context.Background(), args, strings.NewReader(""), &out, &errb)
		return out.String(), errb.String()
	}
	t.Setenv("CORRAL_COMPLETION_TIMEOUT", "5m")
	if out, _ := complete(); !strings.Contains(out, "local-lvm:vm-") {
		t.Fatalf("completion with time to read the cluster offers no volume:\n%s", out)
	}
	t.Setenv("CORRAL_COMPLETION_TIMEOUT", "1ns")
	if out, errs := complete(); strings.Contains(out, "local-lvm:") || strings.Contains(errs, "Error") || strings.Contains(errs, "corral:") {
		t.Errorf("completion out of time offers %q and says %q; want nothing", out, errs)
	}
}
