package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/ui"
)

// fileFlags are the flags of every verb that reads a manifest.
type fileFlags struct {
	path string
	// overrides are the files given by a second and later -f, merged
	// over path in order (docker compose's override files; manifest
	// LoadFiles). path alone gives the project and who declares it.
	overrides []string
	output    string
	// lazy: the verb neither provisions nor creates containers, so it
	// loads the manifest without the values only those need (see
	// manifest.LoadOptions.Lazy) and never asks for their secrets.
	lazy bool
}

func (f *fileFlags) add(fs *pflag.FlagSet) {
	f.path = "corral.yaml"
	fs.VarP(&filesValue{ff: f}, "file", "f", "manifest to read; repeat to merge override files over it, in order (-f corral.yaml -f offline.override.yaml)")
	fs.StringVarP(&f.output, "output", "o", "text", "output format: text or json")
}

// files are the manifest and its override files, in order.
func (f *fileFlags) files() []string { return append([]string{f.path}, f.overrides...) }

// named is how messages name the manifest: its file, with the override
// files merged over it.
func (f *fileFlags) named() string {
	if len(f.overrides) == 0 {
		return f.path
	}
	return f.path + " with " + strings.Join(f.overrides, ", ")
}

// single refuses override files for a verb that reads one manifest file
// as it is (the agent keeps re-reading one file, or a repository's).
func (f *fileFlags) single(verb string) error {
	if len(f.overrides) > 0 {
		return fmt.Errorf("%s reads one manifest file, and -f was given %d times: merge %s into %s, or run %s with %s alone",
			verb, len(f.overrides)+1, strings.Join(f.overrides, ", "), f.path, verb, f.path)
	}
	return nil
}

// filesValue is -f: the first one replaces the default corral.yaml, each
// later one is an override file.
type filesValue struct {
	ff  *fileFlags
	set bool
}

func (v *filesValue) Set(s string) error {
	if !v.set {
		v.ff.path, v.set = s, true
		return nil
	}
	v.ff.overrides = append(v.ff.overrides, s)
	return nil
}

func (v *filesValue) String() string {
	if v.ff == nil {
		return ""
	}
	return strings.Join(v.ff.files(), ",")
}

func (v *filesValue) Type() string { return "FILE" }

func (f *fileFlags) json() (bool, error) {
	switch f.output {
	case "text", "":
		return false, nil
	case "json":
		return true, nil
	}
	return false, fmt.Errorf("--output %q: want text or json", f.output)
}

// loadManifest reads and validates the manifest. A missing file gets a hint
// on how to start one.
// With lazy, references only provisioning reads may stay unread.
func loadManifest(path string, lazy bool) (*manifest.File, error) {
	return loadManifestIn(path, lazy, nil)
}

// loadManifestIn is loadManifest with what the manifest may read from
// this host confined (nil: a human's manifest, which reads any file and
// variable but corral's own secrets).
func loadManifestIn(path string, lazy bool, confine *manifest.Confine) (*manifest.File, error) {
	return loadFiles([]string{path}, lazy, confine)
}

// load reads the manifest -f names, with its override files merged.
func (f *fileFlags) load(lazy bool) (*manifest.File, error) {
	return loadFiles(f.files(), lazy, nil)
}

func loadFiles(paths []string, lazy bool, confine *manifest.Confine) (*manifest.File, error) {
	f, err := manifest.LoadFiles(paths, manifest.LoadOptions{Lazy: lazy, Confine: confine})
	if errors.Is(err, os.ErrNotExist) {
		for _, p := range paths[1:] {
			if _, serr := os.Stat(p); errors.Is(serr, os.ErrNotExist) {
				return nil, fmt.Errorf("override file %s not found: check the path of the -f after %s", p, paths[0])
			}
		}
		return nil, fmt.Errorf("%s not found: pass -f FILE, or start from examples/quickstart/corral.yaml", paths[0])
	}
	return f, err
}

// isTerminal reports whether r is an interactive terminal (for prompts).
func isTerminal(r any) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// approve asks q through confirm unless auto (--auto-approve) approves
// already.
func approve(st *streams, auto bool, q ui.Question) error {
	if auto {
		return nil
	}
	return confirm(st, q)
}

// confirm asks a yes/no question on the terminal. Without a terminal it
// refuses, so that a script never applies changes nobody approved; the
// question's Review names what to look at before approving (the
// command's own plan).
func confirm(st *streams, q ui.Question) error {
	if !isTerminal(st.in) {
		return fmt.Errorf("refusing to change anything without confirmation: stdin is not a terminal; review %s and pass --auto-approve", q.Review)
	}
	ui.WriteConfirm(st.err, q)
	var answer string
	fmt.Fscanln(st.in, &answer)
	if answer != "yes" {
		return &exitError{code: ExitError, err: errors.New("cancelled: nothing was changed")}
	}
	return nil
}

// job is where every verb that reads a manifest and talks to the cluster
// starts: the output format checked, the manifest loaded and valid, and a
// connection (to the embedded emulator when none is configured).
type job struct {
	f      *manifest.File
	s      *session
	asJSON bool
}

func openJob(ctx context.Context, st *streams, ff fileFlags, cf connFlags) (*job, error) {
	asJSON, err := ff.json()
	if err != nil {
		return nil, err
	}
	f, err := ff.load(ff.lazy)
	if err != nil {
		return nil, err
	}
	s, err := connect(ctx, st, cf)
	if err != nil {
		return nil, err
	}
	return &job{f: f, s: s, asJSON: asJSON}, nil
}

func (j *job) Close() { j.s.Close() }
