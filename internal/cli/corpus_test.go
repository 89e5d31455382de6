package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/corralhq/corral/internal/pve"
	"github.com/corralhq/corral/internal/pvetest"
	"github.com/corralhq/corral/internal/sim"
	"github.com/corralhq/corral/internal/testutil/secretscan"
)

// The bad-input corpus: testdata/bad/*.case, one broken manifest or
// command line per file, run through the real command line (Run) against
// an emulator serving HTTPS on loopback. Each case says its exit code and
// what stderr (and stdout) must hold, and the run asserts that nothing in
// the emulator changed: /cluster/resources and the content of every
// storage on every node read the same before and after.
//
// A case file is header lines, then optionally the manifest:
//
//	# what the case shows (comments)
//	setup: apply -f SETUP --auto-approve   (run first, must exit 0; SETUP is the setup manifest)
//	args: validate -f FILE                 (corral's arguments, split on spaces)
//	env: NAME=VALUE                        (set for the run)
//	faults: {"drop":1}                     (the emulator's faults for the run, a sim.FaultSpec)
//	exit: 1
//	stderr: <text stderr must hold>        (none: stderr must be empty)
//	stdout: <text stdout must hold>        (none: stdout must be empty)
//	-- setup.yaml --
//	…
//	-- corral.yaml --
//	…
//
// In args, FILE is the manifest's path, CONN the flags that connect to the
// emulator, WRONGFP and WRONGSECRET those flags with a wrong fingerprint
// or token secret, CLOSED a loopback host:port nothing listens on, and
// {{DIR}} the case's directory (also in the manifest). In expected text,
// <file>, <dir>, <addr> and <fp> stand for the manifest's path, its
// directory, the endpoint's host:port and the emulator's fingerprint.
type corpusCase struct {
	name    string
	setup   [][]string
	args    []string
	env     map[string]string
	exit    int
	stderr  []string
	stdout  []string
	files   map[string]string // section name → text
	hasExit bool
	faults  string // JSON of a sim.FaultSpec set after setup
}

func parseCase(t *testing.T, path string) corpusCase {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c := corpusCase{name: strings.TrimSuffix(filepath.Base(path), ".case"), env: map[string]string{}, files: map[string]string{}}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if name, ok := strings.CutPrefix(line, "-- "); ok && strings.HasSuffix(name, " --") {
			section = strings.TrimSuffix(name, " --")
			c.files[section] = ""
			continue
		}
		if section != "" {
			c.files[section] += line + "\n"
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, val, ok := strings.Cut(line, ": ")
		if !ok {
			key, val = strings.TrimSuffix(line, ":"), ""
		}
		switch key {
		case "setup":
			c.setup = append(c.setup, strings.Fields(val))
		case "args":
			c.args = strings.Fields(val)
		case "env":
			k, v, _ := strings.Cut(val, "=")
			c.env[k] = v
		case "faults":
			c.faults = val
		case "exit":
			c.exit, err = strconv.Atoi(val)
			c.hasExit = err == nil
		case "stderr":
			c.stderr = append(c.stderr, val)
		case "stdout":
			c.stdout = append(c.stdout, val)
		default:
			t.Fatalf("%s: unknown header %q", path, line)
		}
	}
	if len(c.args) == 0 || !c.hasExit {
		t.Fatalf("%s: a case needs args: and exit:", path)
	}
	return c
}

// clusterState is what a bad input must leave as it was.
type clusterState struct {
	Resources []pve.ClusterResource   `json:"resources"`
	Content   map[string][]pve.Volume `json:"content"` // node/storage → volumes
}

// state reads the emulator's guests and storage contents as root sees them.
func (c *cluster) state() clusterState {
	c.t.Helper()
	ctx := context.Background()
	pc := pvetest.Client(c.t, c.srv, c.srv.Credentials().RootToken)
	res, err := pc.ClusterResources(ctx, "")
	if err != nil {
		c.t.Fatal(err)
	}
	st := clusterState{Content: map[string][]pve.Volume{}}
	for _, r := range res {
		// What moves by itself (load, uptime, counters) is not a change.
		r.CPU, r.Mem, r.Uptime, r.DiskRead, r.DiskWrite, r.NetIn, r.NetOut = 0, 0, 0, 0, 0, 0, 0
		if r.Type == "node" {
			r.Disk = 0
		}
		st.Resources = append(st.Resources, r)
	}
	nodes, err := pc.Nodes(ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, n := range nodes {
		storages, err := pc.StorageList(ctx, n.Node, "")
		if err != nil {
			c.t.Fatal(err)
		}
		for _, s := range storages {
			vols, err := pc.StorageContent(ctx, n.Node, s.Storage, "", 0)
			if err != nil {
				c.t.Fatal(err)
			}
			st.Content[n.Node+"/"+s.Storage] = vols
		}
	}
	return st
}

// usesEmbedded reports whether a case runs a command that may reach an
// emulator with no connection flags: the embedded one, whose state all
// such runs share, so the case stays out of the parallel ones.
func usesEmbedded(tc corpusCase) bool {
	for _, args := range append([][]string{tc.args}, tc.setup...) {
		if !slices.Contains(args, "CONN") && !slices.Contains(args, "WRONGFP") && !slices.Contains(args, "WRONGSECRET") && !slices.Contains(args, "--endpoint") {
			return true
		}
	}
	return false
}

// ownsEmulator reports whether a case may change or address the test's
// emulator (connection flags, setup commands, faults): it then gets one
// of its own, and the others share one (starting an emulator per case
// was most of this test's CPU).
func ownsEmulator(tc corpusCase) bool {
	if tc.faults != "" || len(tc.setup) > 0 {
		return true
	}
	for _, a := range tc.args {
		if a == "CONN" || a == "WRONGFP" || a == "WRONGSECRET" {
			return true
		}
	}
	return false
}

// embeddedCases keeps the corpus's cases that may reach the embedded
// emulator (usesEmbedded) one at a time: they share its state directory.
var embeddedCases sync.Mutex

// TestBadInputCorpus runs in parallel with the package's other tests
// (TestMain clears the connection variables for them all) unless a case
// sets a variable, which only a serial test may; its cases run in
// parallel, those that may reach the embedded emulator one at a time.
func TestBadInputCorpus(t *testing.T) {
	files, err := filepath.Glob("testdata/bad/*.case")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 60 {
		t.Errorf("only %d cases in testdata/bad; the corpus holds at least 60", len(files))
	}
	cases := make([]corpusCase, len(files))
	anyEnv := false
	for i, path := range files {
		cases[i] = parseCase(t, path)
		anyEnv = anyEnv || len(cases[i].env) > 0
	}
	if !anyEnv {
		t.Parallel()
	}
	closed := closedPort(t)
	// The cases that never address the test's emulator (most of the
	// corpus: a refusal before any connection) share one, read-only to
	// them; its unchanged state is still checked after each.
	shared := newCluster(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.env) == 0 {
				t.Parallel() // its own emulator, and no variable of its own
			}
			if usesEmbedded(tc) {
				embeddedCases.Lock()
				defer embeddedCases.Unlock()
			}
			c := &cluster{t: t, srv: shared.srv}
			if ownsEmulator(tc) {
				c = newCluster(t)
			}
			var secrets secretscan.Set
			token := c.srv.Credentials().OperatorToken
			secrets.AddToken(t, "operator token secret", token)
			secrets.AddToken(t, "root token secret", c.srv.Credentials().RootToken)
			wrongToken := token[:strings.Index(token, "=")+1] + "00000000-0000-0000-0000-000000000000"
			host := strings.TrimPrefix(c.srv.URL(), "https://")
			dir := t.TempDir()
			paths := map[string]string{}
			for name, text := range tc.files {
				p := filepath.Join(dir, name)
				if err := os.WriteFile(p, []byte(strings.ReplaceAll(text, "{{DIR}}", dir)), 0o644); err != nil {
					t.Fatal(err)
				}
				paths[name] = p
			}
			file := filepath.Join(dir, "corral.yaml")
			expand := func(in []string) []string {
				var args []string
				for _, a := range in {
					switch a {
					case "FILE":
						args = append(args, file)
					case "SETUP":
						args = append(args, paths["setup.yaml"])
					case "CONN":
						args = append(args, c.connArgs()...)
					case "WRONGFP":
						args = append(args, "--endpoint", c.srv.URL(), "--api-token", token, "--fingerprint", strings.Repeat("AB:", 31)+"AB")
					case "WRONGSECRET":
						args = append(args, "--endpoint", c.srv.URL(), "--api-token", wrongToken, "--fingerprint", c.srv.Fingerprint())
					default:
						a = strings.ReplaceAll(a, "{{DIR}}", dir)
						args = append(args, strings.ReplaceAll(a, "CLOSED", closed))
					}
				}
				return args
			}
			for _, s := range tc.setup {
				var out, errb bytes.Buffer
				if code := Run(context.Background(), expand(s), strings.NewReader(""), &out, &errb); code != 0 {
					t.Fatalf("setup corral %s: exit %d\n%s%s", strings.Join(s, " "), code, out.String(), errb.String())
				}
			}
			for k, v := range tc.env {
				t.Setenv(k, strings.ReplaceAll(v, "{{DIR}}", dir))
			}
			before := c.state()
			if tc.faults != "" {
				var spec sim.FaultSpec
				if err := json.Unmarshal([]byte(tc.faults), &spec); err != nil {
					t.Fatalf("faults: %v", err)
				}
				c.srv.SetFaults(spec)
			}

			var out, errb bytes.Buffer
			code := Run(context.Background(), expand(tc.args), strings.NewReader(""), &out, &errb)

			secrets.Check(t, "stdout", out.String())
			secrets.Check(t, "stderr", errb.String())
			norm := strings.NewReplacer(file, "<file>", dir, "<dir>", host, "<addr>", closed, "<addr>", c.srv.Fingerprint(), "<fp>")
			stderr, stdout := norm.Replace(errb.String()), norm.Replace(out.String())
			cmdline := "corral " + strings.Join(tc.args, " ")
			if code != tc.exit {
				t.Errorf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", cmdline, code, tc.exit, stdout, stderr)
			}
			checkOutput(t, "stderr", stderr, tc.stderr)
			checkOutput(t, "stdout", stdout, tc.stdout)
			for _, bad := range []string{"panic:", "goroutine ", "runtime error"} {
				if strings.Contains(stderr+stdout, bad) {
					t.Errorf("%s: output holds %q:\n%s%s", cmdline, bad, stdout, stderr)
				}
			}
			c.srv.SetFaults(sim.FaultSpec{})
			after := c.state()
			if b, a := mustJSON(t, before), mustJSON(t, after); b != a {
				t.Errorf("%s changed the cluster:\nbefore: %s\nafter:  %s", cmdline, b, a)
			}
		})
	}
}

// checkOutput: every wanted text is in got; no wanted text means got is
// empty.
func checkOutput(t *testing.T, name, got string, want []string) {
	t.Helper()
	if len(want) == 0 && got != "" {
		t.Errorf("%s should be empty:\n%s", name, got)
	}
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("%s lacks %q:\n%s", name, w, got)
		}
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
