package cli

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/manifest"
)

// completeAppNames gives every command whose first argument is an APP
// (and destroy, whose every argument is) shell completion of the app
// names in the manifest that -f names.
func completeAppNames(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		fields := strings.Fields(c.Use)
		if c.ValidArgsFunction != nil || len(fields) < 2 || !strings.Contains(fields[1], "APP") {
			return
		}
		many := strings.Contains(fields[1], "...")
		c.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 && !many {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return appNames(cmd, args, toComplete), cobra.ShellCompDirectiveNoFileComp
		}
	}
	walk(root)
}

// appNames are the manifest's apps starting with prefix, less those in
// args already.
func appNames(cmd *cobra.Command, args []string, prefix string) []string {
	path := "corral.yaml"
	if f := cmd.Flags().Lookup("file"); f != nil {
		path = f.Value.String()
	}
	m, err := manifest.Load(path, manifest.LoadOptions{Lazy: true})
	if err != nil {
		return nil
	}
	var out []string
	for _, a := range m.Apps {
		if strings.HasPrefix(a.Name, prefix) && !contains(args, a.Name) {
			out = append(out, a.Name)
		}
	}
	return out
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
