package manifest_test

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/testenv"
)

// mergeBase is the first file of most merge cases.
const mergeBase = `apps:
  - name: web
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
    memory: 512
    features: {nesting: true}
    network: {bridge: vmbr0, ip: dhcp}
    tags: [a, b]
    volumes:
      - {name: data, size: 1G, mount: /data}
      - {name: logs, size: 1G, mount: /logs, backup: false}
    provision:
      - name: install
        run: apt-get install -y nginx
      - file: {path: /etc/app.conf, content: "base\n"}
      - envFile:
          path: /etc/app.env
          env: [{name: KEY, value: "${env:API_KEY}"}]
      - compose: {content: "services: {}\n"}
    health:
      - http: http://localhost/
      - {name: port, tcp: localhost:80}
  - name: db
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
outputs:
  - {name: url, value: "http://web/"}
`

// TestParseFiles_merge is the table of override merges (docs/manifest.md,
// "Override files"): each case's merged manifest, summed up, or its
// problems, is compared with testdata/merge/NAME.txt (go test -update
// rewrites them).
func TestParseFiles_merge(t *testing.T) {
	cases := []struct {
		name  string
		files []string // after mergeBase unless base is set
		base  string
	}{
		{"scalars-maps-lists", []string{`apps:
  - name: web
    memory: 1024          # a scalar: replaced
    network: {ip: 10.0.0.5/24, gateway: 10.0.0.1}   # a mapping: merged key by key (bridge kept)
    tags: [c]             # a list without a rule: replaced as a whole
`}, ""},
		{"apps-by-name", []string{`apps:
  - name: cache           # new: after the last app
    template: local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst
  - name: db              # matched: merged
    cores: 2
`}, ""},
		{"volumes-by-name", []string{`apps:
  - name: web
    volumes:
      - {name: logs, size: 5G}        # matched: merged (mount and backup kept)
      - {name: cache, size: 2G, mount: /cache}
`}, ""},
		{"steps-by-name", []string{`apps:
  - name: web
    provision:
      - name: install                 # matched by name: replaced as a whole, in place
        run: apt-get install -y apache2
      - file: {path: /etc/extra.conf, content: "new\n"}   # new: right after install
      - file: {path: /etc/app.conf, content: "override\n"}   # matched by its derived name
      - run: echo last                # new, after file: /etc/app.conf
`}, ""},
		{"new-step-first-goes-last", []string{`apps:
  - name: web
    provision:
      - run: echo appended
      - compose: {content: "services: {x: {image: y}}\n"}   # matched: compose: /opt/web/compose.yaml
`}, ""},
		{"health-by-name", []string{`apps:
  - name: web
    health:
      - {name: port, tcp: localhost:8080}     # matched by name: replaced
      - http: http://localhost/               # matched by its derived name
        retries: 9
      - {name: extra, command: "true"}
`}, ""},
		{"outputs-by-name", []string{`outputs:
  - {name: url, value: "https://web/"}
  - {name: more, value: "x"}
`}, ""},
		{"three-files-in-order", []string{`apps:
  - name: web
    memory: 1024
`, `apps:
  - name: web
    memory: 2048
    cores: 4
`}, ""},
		{"same-project-allowed", []string{`project: shop
apps:
  - {name: web, cores: 2}
`}, "project: shop\n" + mergeBase},
		{"project-change-refused", []string{`project: other
`}, "project: shop\n" + mergeBase},
		{"override-problems-name-their-file", []string{`apps:
  - name: web
    memroy: 1024
    provision:
      - file: {path: /etc/x, content: "x", mode: "999"}
`}, ""},
		{"override-not-a-mapping", []string{"- name: web\n"}, ""},
		{"appended-step-may-name-base-steps", []string{`apps:
  - name: web
    provision:
      - run: echo first
        onChange: ["file: /etc/app.conf"]
`}, ""},
		{"relative-source-from-override-dir", []string{`apps:
  - name: web
    provision:
      - file: {path: /etc/app.conf, source: files/app.conf}
`}, ""},
		{"anchor-shared-by-apps", []string{`apps:
  - name: web
    features: {nesting: false}
`}, `apps:
  - {name: web, template: "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst", features: &feat {nesting: true}}
  - {name: db, template: "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst", features: *feat}
`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			base := tc.base
			if base == "" {
				base = mergeBase
			}
			srcs := []manifest.Source{{Name: "base.yaml", Data: []byte(base)}}
			for i, o := range tc.files {
				srcs = append(srcs, manifest.Source{Name: fmt.Sprintf("over/override%d.yaml", i+1), Data: []byte(o)})
			}
			opts := testOptions()
			read := opts.ReadFile
			opts.ReadFile = func(path string) ([]byte, error) {
				if path == filepath.Join("over", "files", "app.conf") {
					return []byte("from the override's directory\n"), nil
				}
				return read(path)
			}
			f, err := manifest.ParseFiles(srcs, opts)
			var got string
			if err != nil {
				var diags *manifest.Diagnostics
				if !errors.As(err, &diags) {
					t.Fatalf("error %T, want *manifest.Diagnostics: %v", err, err)
				}
				got = "problems:\n" + err.Error() + "\n"
			} else {
				got = summary(f)
			}
			for _, s := range secretValues {
				if strings.Contains(got, s) {
					t.Errorf("leaks the secret %q", s)
				}
			}
			testenv.Golden(t, filepath.Join("testdata", "merge", tc.name+".txt"), []byte(got))
		})
	}
}

// summary is what a merge decides, one line per thing.
func summary(f *manifest.File) string {
	var b strings.Builder
	fmt.Fprintf(&b, "path %s, overrides %v, project %s (set %v)\n", f.Path, f.Overrides, f.Project, f.ProjectSet)
	for _, a := range f.Apps {
		fmt.Fprintf(&b, "app %s (%s:%d): cores %d, memory %d, nesting %v, net %s %s %s, tags %v\n",
			a.Name, a.Pos.File, a.Pos.Line, a.Cores, a.MemoryMiB, a.Features.Nesting, a.Network.Bridge, a.Network.IP, a.Network.Gateway, a.Tags)
		for _, v := range a.Volumes {
			fmt.Fprintf(&b, "  volume %s %s %s backup %v\n", v.Name, v.Size, v.Mount, v.Backup)
		}
		for _, s := range a.Provision {
			what := firstLineOf(s.Run + s.Content)
			fmt.Fprintf(&b, "  step %q (%s:%d) %s %s %q onChange %v\n", s.Name, s.Pos.File, s.Pos.Line, s.Kind, s.Path, what, s.OnChange)
		}
		for _, c := range a.Health {
			fmt.Fprintf(&b, "  check %q (%s:%d) retries %d\n", c.Name, c.Pos.File, c.Pos.Line, c.Retries)
		}
	}
	for _, o := range f.Outputs {
		fmt.Fprintf(&b, "output %s = %s\n", o.Name, f.Redact(o.Value))
	}
	return b.String()
}

func firstLineOf(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// TestLoadFiles_readsEachFile: LoadFiles reads every file, and a missing
// override is os.ErrNotExist as a missing manifest is.
func TestLoadFiles_readsEachFile(t *testing.T) {
	opts := testOptions()
	opts.ReadFile = func(path string) ([]byte, error) {
		switch path {
		case "corral.yaml":
			return []byte(mergeBase), nil
		case "offline.override.yaml":
			return []byte("apps:\n  - {name: db, cores: 3}\n"), nil
		}
		return nil, &fs.PathError{Op: "open", Path: path, Err: fs.ErrNotExist}
	}
	f, err := manifest.LoadFiles([]string{"corral.yaml", "offline.override.yaml"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if db, _ := f.App("db"); db.Cores != 3 || len(f.Overrides) != 1 {
		t.Errorf("db cores %d, overrides %v", db.Cores, f.Overrides)
	}
	if _, err := manifest.LoadFiles([]string{"corral.yaml", "gone.yaml"}, opts); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing override: %v, want fs.ErrNotExist", err)
	}
}
