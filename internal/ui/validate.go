package ui

import (
	"errors"

	"github.com/corralhq/corral/internal/manifest"
)

// ValidationJSON is corral validate -o json: the manifest's file (and
// the override files merged over it), whether it is valid, its apps when
// it is, its problems when not.
type ValidationJSON struct {
	Apps     []string `json:"apps"`
	File     string   `json:"file"`
	Files    []string `json:"files"`
	Problems []string `json:"problems"`
	Valid    bool     `json:"valid"`
}

// NewValidationJSON is the verdict on the manifest f loaded from files
// (the first is file) with err: each problem a FILE:LINE:COL line, with
// the line saying how many more there are.
func NewValidationJSON(file string, files []string, f *manifest.File, err error) ValidationJSON {
	v := ValidationJSON{Apps: []string{}, File: file, Files: files, Problems: []string{}, Valid: err == nil}
	var d *manifest.Diagnostics
	switch {
	case errors.As(err, &d):
		var ps []string
		for _, it := range d.Items {
			ps = append(ps, it.String())
		}
		if m := d.MoreLine(); m != "" {
			ps = append(ps, m)
		}
		v.Problems = ps
	case err != nil:
		v.Problems = []string{err.Error()}
	default:
		var names []string
		for _, a := range f.Apps {
			names = append(names, a.Name)
		}
		v.Apps = names
	}
	return v
}
