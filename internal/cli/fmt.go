package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/localfile"
	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/ui"
)

func newFmtCmd(st *streams) *cobra.Command {
	var check bool
	var output string
	cmd := &cobra.Command{
		Use:         "fmt [FILE...]",
		Annotations: jsonForm(),
		Short:       "Rewrite a manifest in canonical YAML layout, comments kept (--check: exit 1 if it would change)",
		Long: `fmt rewrites FILE (default corral.yaml) in corral's canonical YAML layout:
two spaces of indentation, lists indented under their key, comments kept,
keys in their order and every value as written. It checks that the result
holds the same values and comments before it writes, and leaves the file
as it is otherwise. The manifest need not be valid: fmt reads it as YAML.

With --check it writes nothing, and exits 1 when the file would change
(for CI), 0 when it is formatted. -o json prints {file, formatted,
written} on stdout either way.

Several files (a manifest and its override files) are each formatted on
their own, as if fmt ran once per file; -o json then prints one object
per file, one after the other. The exit status is 1 when any file failed
or, with --check, would change.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				args = []string{"corral.yaml"}
			}
			if output != "text" && output != "json" {
				return fmt.Errorf("-o %s: want text or json", output)
			}
			var errs []error
			for _, path := range args {
				r, err := runFmt(st, path, check)
				if output == "json" && r != nil {
					if jerr := writeJSON(st, r); jerr != nil {
						return jerr
					}
				}
				if err != nil {
					errs = append(errs, err)
				}
			}
			return fmtErrors(errs)
		},
	}
	cmd.Flags().BoolVar(&check, "check", false, "write nothing; exit 1 when the file is not formatted")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}

// fmtErrors is the error of a fmt run over several files: nil, the one
// error as it is (an --check exitError keeps its exit status), or every
// error, one a line.
func fmtErrors(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return &exitError{code: ExitError, err: errors.Join(errs...)}
}

// fmtResult is corral fmt's answer: whether the file was already in
// canonical layout, and whether fmt rewrote it.
type fmtResult struct {
	File      string `json:"file"`
	Formatted bool   `json:"formatted"`
	Written   bool   `json:"written"`
}

// runFmt formats the manifest at path in place, or with check only says
// whether it would change. The result is nil when the file could not be
// read or formatted.
func runFmt(st *streams, path string, check bool) (*fmtResult, error) {
	data, err := localfile.Read(path, localfile.MaxManifest)
	if err != nil {
		return nil, fmt.Errorf("fmt %s: %w", path, err)
	}
	out, err := manifest.Format(data)
	if err != nil {
		return nil, fmt.Errorf("fmt %s: %w", path, err)
	}
	r := &fmtResult{File: path, Formatted: bytes.Equal(out, data)}
	switch {
	case r.Formatted:
		return r, nil
	case check:
		return r, &exitError{code: ExitError, err: fmt.Errorf("%s is not formatted: run corral fmt %s", path, path)}
	}
	if err := writeFileLike(path, out); err != nil {
		return r, fmt.Errorf("fmt %s: %w", path, err)
	}
	r.Written = true
	ui.WriteFormatted(st.err, path)
	return r, nil
}

// writeFileLike replaces the file at path with data, keeping its mode:
// written beside it and renamed over it, so a crash leaves either the old
// file or the new one, never half of it.
func writeFileLike(path string, data []byte) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".fmt-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename, there is nothing to remove
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(fi.Mode().Perm()); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
