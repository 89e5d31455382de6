package cli

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/corralhq/corral/internal/manifest"
)

// fileFlags are the flags of every verb that reads a manifest.
type fileFlags struct {
	path   string
	output string
	// lazy: the verb neither provisions nor creates containers, so it
	// loads the manifest without the values only those need (see
	// manifest.LoadOptions.Lazy) and never asks for their secrets.
	lazy bool
}

func (f *fileFlags) add(fs *pflag.FlagSet) {
	fs.StringVarP(&f.path, "file", "f", "corral.yaml", "manifest to read")
	fs.StringVarP(&f.output, "output", "o", "text", "output format: text or json")
}

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
	f, err := manifest.Load(path, manifest.LoadOptions{Lazy: lazy, Confine: confine})
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s not found: pass -f FILE, or start from examples/quickstart/corral.yaml", path)
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

// confirm asks a yes/no question on the terminal. Without a terminal it
// refuses, so that a script never applies changes nobody approved; review
// names what to look at before approving (the command's own plan).
func confirm(st *streams, question, review string) error {
	if !isTerminal(st.in) {
		return fmt.Errorf("refusing to change anything without confirmation: stdin is not a terminal; review %s and pass --auto-approve", review)
	}
	fmt.Fprintf(st.err, "\n%s Only 'yes' is accepted: ", question)
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
	f, err := loadManifest(ff.path, ff.lazy)
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
