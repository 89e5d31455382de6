package cli

import (
	"fmt"
	"runtime/debug"

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
			fmt.Fprintf(st.out, "corral %s\n", v.Version)
			if v.Commit != "" {
				mod := ""
				if v.Modified {
					mod = " (with uncommitted changes)"
				}
				fmt.Fprintf(st.out, "commit %s%s %s\n", v.Commit, mod, v.Time)
			}
			fmt.Fprintf(st.out, "built with %s\n", v.Go)
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	return cmd
}
