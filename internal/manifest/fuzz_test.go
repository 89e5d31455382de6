package manifest_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/testutil/memcap"
)

// FuzzParse: Parse never panics nor allocates more than memcap.Budget
// (issue 27), every rejection is a *Diagnostics whose
// entries point into the file and leak no secret, and every accepted
// manifest holds what the rules promise. The seed corpus is the examples,
// testdata/bad, the valid test manifests and testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	for _, data := range fuzzParseSeeds(f) {
		f.Add(data)
	}
	f.Fuzz(checkParse)
}

// fuzzParseSeeds are the seeds FuzzParse adds: the examples, testdata/bad
// and the valid test manifests.
func fuzzParseSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	paths, _ := filepath.Glob("testdata/bad/*.yaml")
	paths = append(paths, "../../examples/quickstart/corral.yaml", "../../examples/hermes/corral.yaml")
	var seeds [][]byte
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, data)
	}
	for _, c := range validCases {
		seeds = append(seeds, []byte(c.yaml))
	}
	return seeds
}

// checkParse is FuzzParse's property, shared with its smoke test.
func checkParse(t *testing.T, data []byte) {
	var file *manifest.File
	var err error
	memcap.Run(t, memcap.Budget, len(data), func() { file, err = manifest.Parse("fuzz.yaml", data, testOptions()) })
	if err != nil {
		var diags *manifest.Diagnostics
		if !errors.As(err, &diags) {
			t.Fatalf("error is %T, not *manifest.Diagnostics: %v", err, err)
		}
		if len(diags.Items) == 0 {
			t.Fatal("empty *Diagnostics")
		}
		for _, d := range diags.Items {
			if d.Pos.File != "fuzz.yaml" || d.Pos.Line < 1 || d.Message == "" {
				t.Fatalf("diagnostic without position or message: %+v", d)
			}
		}
		for _, s := range secretValues {
			if strings.Contains(err.Error(), s) {
				t.Fatalf("diagnostics leak %q", s)
			}
		}
		return
	}
	if len(file.Apps) == 0 {
		t.Fatal("accepted a manifest without apps")
	}
	names := map[string]bool{}
	for _, a := range file.Apps {
		if a.Name == "" || names[a.Name] {
			t.Fatalf("app name %q empty or repeated", a.Name)
		}
		names[a.Name] = true
		if !strings.Contains(a.Template, ":vztmpl/") || a.Cores < 1 || a.MemoryMiB < 16 || a.RootFS.Size <= 0 || a.Network.Bridge == "" {
			t.Fatalf("app %+v breaks the rules", a)
		}
		if !a.Network.DHCP() && !strings.Contains(a.Network.IP, "/") || a.Network.DHCP() && a.Network.Gateway != "" {
			t.Fatalf("app %q has network %+v", a.Name, a.Network)
		}
		mounts := map[string]bool{}
		for _, v := range a.Volumes {
			if v.Mount == "" || v.Mount == "/" || mounts[v.Mount] || (v.Size <= 0 && v.Adopt == "") || v.Storage == "" {
				t.Fatalf("app %q volume %+v breaks the rules", a.Name, v)
			}
			mounts[v.Mount] = true
			if v.Reclaim != manifest.ReclaimRetain && v.Reclaim != manifest.ReclaimDelete {
				t.Fatalf("reclaim %q", v.Reclaim)
			}
		}
		checkProvision(t, a)
	}
}

// checkProvision checks the rules of provision steps, health checks and
// the backup policy on an accepted app.
func checkProvision(t *testing.T, a manifest.App) {
	t.Helper()
	names := map[string]bool{}
	compose := false
	for _, st := range a.Provision {
		if st.Name == "" || names[st.Name] || st.Timeout <= 0 {
			t.Fatalf("app %q step %+v: empty or repeated name, or no timeout", a.Name, st)
		}
		names[st.Name] = true
		switch st.Kind {
		case manifest.StepRun:
			if st.Run == "" {
				t.Fatalf("run step %q without a script", st.Name)
			}
		case manifest.StepFile, manifest.StepEnvFile, manifest.StepCompose:
			if !strings.HasPrefix(st.Path, "/") || st.Path == "/" || filepath.Clean(st.Path) != st.Path {
				t.Fatalf("step %q path %q", st.Name, st.Path)
			}
			if st.Kind == manifest.StepEnvFile && len(st.Env) == 0 {
				t.Fatalf("envFile step %q without variables", st.Name)
			}
			if st.Kind == manifest.StepCompose {
				compose = true
				if st.Project == "" {
					t.Fatalf("compose step %q without a project", st.Name)
				}
			} else if st.Owner == "" {
				t.Fatalf("step %q without an owner", st.Name)
			}
		case manifest.StepUser:
			if st.Account.Name == "" || !strings.HasPrefix(st.Account.Home, "/") || st.Account.Shell == "" || st.Account.UID < 0 || st.Account.UID > 65533 {
				t.Fatalf("user step %q account %+v", st.Name, st.Account)
			}
		default:
			t.Fatalf("step %q has kind %q", st.Name, st.Kind)
		}
	}
	if compose && !a.Features.Nesting || a.NeedsKeyctl != (compose && a.Unprivileged) {
		t.Fatalf("app %q: compose=%v nesting=%v needsKeyctl=%v unprivileged=%v", a.Name, compose, a.Features.Nesting, a.NeedsKeyctl, a.Unprivileged)
	}
	checks := map[string]bool{}
	for _, c := range a.Health {
		target := map[string]string{"http": c.URL, "tcp": c.Address, "command": c.Command}[c.Kind]
		if c.Name == "" || checks[c.Name] || target == "" || c.Timeout <= 0 || c.Interval <= 0 || c.Retries < 0 ||
			(c.Kind == "http") != (c.Expect != 0) {
			t.Fatalf("app %q check %+v breaks the rules", a.Name, c)
		}
		checks[c.Name] = true
	}
	if b := a.Backup; b.Keep < 0 || b.Storage == "" || (b.Mode != "snapshot" && b.Mode != "stop" && b.Mode != "suspend") {
		t.Fatalf("app %q backup %+v", a.Name, b)
	}
}
