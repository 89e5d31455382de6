package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/testenv"
)

const jsonDoc = "../../docs/json.md"

// TestEveryCommandJSONOrRefuses enumerates every command of corral's
// tree: each one either prints one JSON document for -o json (run here
// against the emulator, its shape compared with docs/json.md) or refuses
// -o json with the same clear error before doing anything. A command in
// neither list fails the test, so a new command cannot silently print
// text to a script that asked for JSON.
func TestEveryCommandJSONOrRefuses(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	m := writeManifestIn(t, "demo", strings.ReplaceAll(appManifest, "MEMORY", "512")) // defaulted: rewrite edits it in place
	// The same manifest, edited to drop app notes (just before volumes
	// rm): its volumes are no longer declared, so volumes rm may free them.
	other := strings.ReplaceAll(strings.ReplaceAll(appManifest, "MEMORY", "512"), "name: notes", "name: other")

	// The runs, in order (a snapshot before its rollback, a backup before
	// its restore); conn adds the flags that reach the emulator.
	type step struct {
		cmd  string // command path, as docs/json.md names it
		args []string
		conn bool
		code int
	}
	var archive string
	steps := []step{
		{"validate", []string{"validate", "-f", m}, false, 0},
		{"schema", []string{"schema"}, false, 0},
		{"version", []string{"version"}, false, 0},
		{"fmt", []string{"fmt", m}, false, 0},
		{"init", []string{"init", "-f", t.TempDir() + "/corral.yaml"}, true, 0},
		{"plan", []string{"plan", "-f", m}, true, ExitChanges},
		{"apply", []string{"apply", "-f", m, "--auto-approve"}, true, 0},
		{"status", []string{"status", "-f", m}, true, 0},
		{"output", []string{"output", "-f", m}, true, 0},
		{"volumes", []string{"volumes"}, true, 0},
		{"doctor", []string{"doctor", "-f", m}, true, 0},
		{"stop", []string{"stop", "notes", "-f", m}, true, 0},
		{"start", []string{"start", "notes", "-f", m}, true, 0},
		{"restart", []string{"restart", "notes", "-f", m}, true, 0},
		{"snapshot", []string{"snapshot", "notes", "before", "-f", m}, true, 0},
		{"snapshots", []string{"snapshots", "notes", "-f", m}, true, 0},
		{"rollback", []string{"rollback", "notes", "before", "-f", m, "--auto-approve"}, true, 0},
		{"backup", []string{"backup", "notes", "-f", m}, true, 0},
		{"backups", []string{"backups", "-f", m}, true, 0},
		{"restore", nil, true, 0}, // args once the archive is known
		{"volumes prune", []string{"volumes", "prune", "-f", m, "--auto-approve"}, true, 0},
		{"move", []string{"move", "notes", "--to", "pve", "-f", m, "--auto-approve"}, true, 0}, // already there: the plan and the summary (TestMoveAppWithVolumes moves)
		{"destroy", []string{"destroy", "-f", m, "--auto-approve"}, true, 0},
		{"drain", []string{"drain", "pve", "-f", m, "--auto-approve"}, true, 0}, // nothing left on it (TestMoveAppWithVolumes drains)
		{"volumes rm", nil, true, 0},                                            // the destroyed app's volume, once no manifest declares it
		{"unlock", []string{"unlock"}, true, 0},
	}
	// Commands with a JSON form that needs what this package's tests do
	// not have, checked by the test named.
	jsonElsewhere := map[string]string{
		"bench":           "cmd/corral TestBenchJSON (bench runs the built corral binary)",
		"agent status":    "TestAgent_runAndGracefulStop (it reads a running agent)",
		"agent install":   "TestAgent_install (it needs guest exec and a built corral binary)",
		"agent uninstall": "TestAgent_install",
		"sim status":      "cmd/corral TestDaemon_keepsContainersRunning (it reads the local emulator, a corral process)",
		"sim doctor":      "TestSimDoctor (its checks and exit status are this machine's; shape in docs/emulator.md)",
		"rescue":          "cmd/corral TestRescue_commandFormWritesThroughToTheApp (it runs a command in a container it makes, over SSH, and needs a stopped app)",
	}
	// Commands whose output is not a document: what they print is the
	// container's, the emulator's, a shell's or a person's.
	refusals := map[string][]string{
		"exec":                  {"exec", "notes", "-f", m, "--", "true"},
		"logs":                  {"logs", "notes", "-f", m},
		"cp":                    {"cp", "notes:/etc/hostname", t.TempDir(), "-f", m},
		"sim serve":             {"sim", "serve", "--state", t.TempDir()},
		"sim env":               {"sim", "env", "--state", t.TempDir()},
		"sim stop":              {"sim", "stop"},
		"sim logs":              {"sim", "logs"},
		"completion bash":       {"completion", "bash"},
		"completion zsh":        {"completion", "zsh"},
		"completion fish":       {"completion", "fish"},
		"completion powershell": {"completion", "powershell"},
		"help":                  {"help"},
		"agent":                 {"agent", "-f", m}, // a daemon: its log is JSON with --log-format json
	}

	// Every runnable command is in one list, and the annotation agrees.
	root := newRoot(context.Background(), &streams{in: strings.NewReader(""), out: &bytes.Buffer{}, err: &bytes.Buffer{}})
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	inSteps := map[string]bool{}
	for _, s := range steps {
		inSteps[s.cmd] = true
	}
	var walk func(*cobra.Command)
	walk = func(cmd *cobra.Command) {
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
		if !cmd.Runnable() || cmd == root {
			return
		}
		path := strings.TrimPrefix(cmd.CommandPath(), "corral ")
		_, refused := refusals[path]
		_, elsewhere := jsonElsewhere[path]
		hasJSON := cmd.Annotations[annJSON] != ""
		switch {
		case elsewhere && hasJSON:
		case !inSteps[path] && !refused:
			t.Errorf("corral %s is in neither list of this test: give it a JSON form (Annotations: jsonForm(), a run here, its shape in docs/json.md) or add it to the refusals", path)
		case inSteps[path] && !hasJSON:
			t.Errorf("corral %s is run for its JSON here but not annotated jsonForm()", path)
		case refused && hasJSON:
			t.Errorf("corral %s is annotated jsonForm() but listed as refusing", path)
		}
	}
	walk(root)

	for path, args := range refusals {
		args = slices.Clone(args)
		if i := slices.Index(args, "--"); i >= 0 {
			args = slices.Insert(args, i, "-o", "json")
		} else {
			args = append(args, "-o", "json")
		}
		r := c.run(args...)
		if r.code != ExitError || !strings.Contains(r.stderr, "-o json: corral "+path+" has no JSON form") || r.stdout != "" {
			t.Errorf("corral %s -o json: exit %d, stdout %q\n%s", path, r.code, r.stdout, r.stderr)
		}
	}

	shapes := map[string][]string{}
	for _, s := range steps {
		args := s.args
		switch s.cmd {
		case "restore":
			args = []string{"restore", "notes", "--archive", archive, "--as", "notes-copy", "-f", m, "--auto-approve"}
		case "volumes rm":
			var vols struct {
				Volumes []struct {
					VolID string `json:"volid"`
					App   string `json:"app"`
				} `json:"volumes"`
			}
			r := c.runC("volumes", "-o", "json")
			json.Unmarshal([]byte(r.stdout), &vols)
			for _, v := range vols.Volumes {
				if v.App == "notes" && args == nil {
					args = []string{"volumes", "rm", v.VolID, "-f", rewrite(t, m, other), "--auto-approve"}
				}
			}
			if args == nil {
				t.Fatalf("no volume of app notes to free:\n%s", r.stdout)
			}
		}
		args = append(slices.Clone(args), "-o", "json")
		var r result
		if s.conn {
			r = c.runC(args...)
		} else {
			r = c.run(args...)
		}
		if r.code != s.code {
			t.Fatalf("corral %s: exit %d, want %d\n%s\n%s", strings.Join(args, " "), r.code, s.code, r.stdout, r.stderr)
		}
		// One document, or (apply: events as they happen) one
		// object per line, each with its "type".
		var docs []any
		dec := json.NewDecoder(strings.NewReader(r.stdout))
		for {
			var v any
			if err := dec.Decode(&v); err != nil {
				if len(docs) == 0 || !strings.Contains(err.Error(), "EOF") {
					t.Fatalf("corral %s: stdout is not JSON: %v\n%s", strings.Join(args, " "), err, r.stdout)
				}
				break
			}
			docs = append(docs, v)
		}
		if len(docs) > 1 && !eventStreams[s.cmd] {
			t.Fatalf("corral %s: more than one JSON document on stdout:\n%s", strings.Join(args, " "), r.stdout)
		}
		if eventStreams[s.cmd] {
			for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
				var ev map[string]any
				if err := json.Unmarshal([]byte(line), &ev); err != nil || ev["type"] == nil {
					t.Fatalf("corral %s: a line that is not one JSON event with a type: %q (%v)", strings.Join(args, " "), line, err)
				}
			}
		}
		v := docs[0]
		if s.cmd == "backup" {
			var b struct {
				Archive string `json:"archive"`
				VolID   string `json:"volid"`
			}
			json.Unmarshal([]byte(r.stdout), &b)
			archive = b.Archive + b.VolID
		}
		if s.cmd == "backups" && archive == "" {
			var b struct {
				Backups []struct {
					VolID string `json:"volid"`
				} `json:"backups"`
			}
			json.Unmarshal([]byte(r.stdout), &b)
			if len(b.Backups) > 0 {
				archive = b.Backups[0].VolID
			}
		}
		if s.cmd == "schema" {
			shapes[s.cmd] = []string{"(a JSON Schema, draft 2020-12, of corral.yaml)"}
			continue
		}
		sh := map[string]map[string]bool{}
		if eventStreams[s.cmd] {
			for _, d := range docs {
				ev, _ := d.(map[string]any)
				shapeOf(d, fmt.Sprintf("{type=%v}", ev["type"]), sh)
			}
		} else {
			shapeOf(v, "", sh)
		}
		shapes[s.cmd] = flatten(sh)
	}

	gen := renderShapes(shapes)
	doc, err := os.ReadFile(jsonDoc)
	if err != nil && !testenv.Updating() {
		t.Fatal(err)
	}
	const begin, end = "<!-- BEGIN GENERATED: go test ./internal/cli -run TestEveryCommandJSONOrRefuses -update -->\n", "<!-- END GENERATED -->\n"
	text := string(doc)
	i, j := strings.Index(text, begin), strings.Index(text, end)
	if i < 0 || j < i {
		t.Fatalf("%s has no generated section (%q … %q)", jsonDoc, begin, end)
	}
	want := text[:i+len(begin)] + gen + text[j:]
	if testenv.Updating() {
		if err := os.WriteFile(jsonDoc, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if want != text {
		t.Errorf("the JSON shapes changed: a script reading them may break. If that is intended, run go test ./internal/cli -run TestEveryCommandJSONOrRefuses -update and say so in the commit. Now:\n%s", gen)
	}
}

// eventStreams are the commands whose -o json is a stream of events, one
// JSON object per line, each with a "type".
var eventStreams = map[string]bool{"apply": true, "move": true, "drain": true}

// shapeOf records, for each field path of v, the JSON types seen there
// (array elements under path[]).
func shapeOf(v any, path string, out map[string]map[string]bool) {
	add := func(typ string) {
		if out[path] == nil {
			out[path] = map[string]bool{}
		}
		out[path][typ] = true
	}
	switch x := v.(type) {
	case map[string]any:
		add("object")
		for k, e := range x {
			p := k
			if path != "" {
				p = path + "." + k
			}
			shapeOf(e, p, out)
		}
	case []any:
		add("array")
		for _, e := range x {
			shapeOf(e, path+"[]", out)
		}
	case string:
		add("string")
	case float64:
		add("number")
	case bool:
		add("bool")
	case nil:
		add("null")
	}
}

func flatten(sh map[string]map[string]bool) []string {
	var out []string
	for p, types := range sh {
		if p == "" {
			p = "."
		}
		var ts []string
		for t := range types {
			ts = append(ts, t)
		}
		sort.Strings(ts)
		out = append(out, fmt.Sprintf("%s: %s", p, strings.Join(ts, "|")))
	}
	sort.Strings(out)
	return out
}

func renderShapes(shapes map[string][]string) string {
	var names []string
	for n := range shapes {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "\n### corral %s -o json\n\n```\n%s\n```\n\n", n, strings.Join(shapes[n], "\n"))
	}
	return b.String()
}
