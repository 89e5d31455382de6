package manifest

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestMergeIDs_matchBuiltNames: the names the merge matches steps and
// checks by (stepID, checkID, read from the YAML as written) are the
// names buildStep and buildHealth give them, for every example and for
// the derived-name cases (a run script with a reference, a compose step
// without a path). A difference would let an override add a second step
// where the user meant to replace one.
func TestMergeIDs_matchBuiltNames(t *testing.T) {
	files, err := filepath.Glob("../../examples/*/*.yaml")
	if err != nil || len(files) < 5 {
		t.Fatalf("examples: %v %v", files, err)
	}
	srcs := map[string][]byte{"derived": []byte(`apps:
  - name: web
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    provision:
      - run: "echo ${env:X} and more"
      - run: |

          echo first line that is longer than forty characters, cut
          echo second
      - run: "echo $${literal}"
      - run: "curl http://${app:db.address}/"
      - compose: {content: "services: {}\n"}
      - compose: {path: /srv/c.yaml, content: "services: {}\n"}
      - user: {name: app}
      - envFile: {path: /etc/e, env: [{name: A, value: b}]}
    health:
      - http: http://localhost/
      - tcp: localhost:80
      - command: |
          test -f /x
          true
      - command: "test ${env:X}"
  - name: db
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
`)}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		srcs[f] = b
	}
	opts := LoadOptions{
		Getenv: func(string) (string, bool) { return "value-of-a-variable", true },
		ReadFile: func(p string) ([]byte, error) {
			if b, err := os.ReadFile(p); err == nil {
				return b, nil
			}
			return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
		},
	}
	for name, data := range srcs {
		f, err := Parse(name, data, opts)
		if err != nil {
			if filepath.Base(name) != "corral.yaml" && name != "derived" {
				continue // an override file: not a manifest alone
			}
			t.Fatalf("%s: %v", name, err)
		}
		var root yaml.Node
		if err := yaml.Unmarshal(data, &root); err != nil {
			t.Fatal(err)
		}
		_, apps := lookup(root.Content[0], "apps")
		for i, an := range apps.Content {
			app := f.Apps[i]
			_, steps := lookup(an, "provision")
			for j := 0; steps != nil && j < len(steps.Content); j++ {
				if got := stepID(steps.Content[j], app.Name); got != app.Provision[j].Name {
					t.Errorf("%s: app %s step %d: merge matches it as %q, corral names it %q", name, app.Name, j, got, app.Provision[j].Name)
				}
			}
			_, checks := lookup(an, "health")
			for j := 0; checks != nil && j < len(checks.Content); j++ {
				if got := checkID(checks.Content[j], app.Name); got != app.Health[j].Name {
					t.Errorf("%s: app %s check %d: merge matches it as %q, corral names it %q", name, app.Name, j, got, app.Health[j].Name)
				}
			}
		}
	}
}
