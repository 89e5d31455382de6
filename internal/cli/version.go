package cli

import (
	"fmt"
	"io"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// buildVersion is what the Go toolchain recorded about this binary: the
// module version (a tag, or (devel) for a local build), the VCS commit and
// whether the tree had changes, and the Go version.
type buildVersion struct {
	Version  string `json:"version"`
	Commit   string `json:"commit,omitempty"`
	Time     string `json:"commit_time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
}

func readBuildVersion() buildVersion {
	v := buildVersion{Version: "(unknown)"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v.Version, v.Go = bi.Main.Version, bi.GoVersion
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Commit = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// text is what `corral version` and `corral --version` print: the
// version line first, then the commit (when known) and the Go version.
func (v buildVersion) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "corral %s\n", v.Version)
	if v.Commit != "" {
		mod := ""
		if v.Modified {
			mod = " (with uncommitted changes)"
		}
		fmt.Fprintf(&b, "commit %s%s %s\n", v.Commit, mod, v.Time)
	}
	fmt.Fprintf(&b, "built with %s\n", v.Go)
	return b.String()
}

// setVersionFlag gives root a --version flag that prints what the version
// command prints. Cobra renders root.Version through a template, so the
// text goes in as data ({{.Version}}), never as the template itself.
func setVersionFlag(root *cobra.Command) {
	root.Version = strings.TrimPrefix(readBuildVersion().text(), "corral ")
	root.SetVersionTemplate("corral {{.Version}}")
}

func newVersionCmd(st *streams) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:         "version",
		Annotations: jsonForm(),
		Short:       "Print corral's version, commit and Go version",
		Args:        cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := readBuildVersion()
			switch output {
			case "json":
				return writeJSON(st, v)
			case "text", "":
			default:
				return fmt.Errorf("--output %q: want text or json", output)
			}
			io.WriteString(st.out, v.text())
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}
