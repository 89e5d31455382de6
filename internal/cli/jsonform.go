package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// annJSON marks a command whose -o json prints one JSON document on
// stdout, in the shape docs/json.md lists. Every other command refuses
// -o json before it does anything (checkJSONForm), so a new command
// cannot silently print text to a script that asked for JSON.
const annJSON = "corral/json-form"

// jsonForm is the Annotations of a command that has a JSON form.
func jsonForm() map[string]string { return map[string]string{annJSON: "yes"} }

// checkJSONForm refuses -o json (or any -o other than text) for a
// command without a JSON form.
func checkJSONForm(cmd *cobra.Command) error {
	f := cmd.Flags().Lookup("output")
	if f == nil || cmd.Annotations[annJSON] != "" {
		return nil
	}
	if v := f.Value.String(); v != "" && v != "text" {
		return noJSONForm(cmd)
	}
	return nil
}

func noJSONForm(cmd *cobra.Command) error {
	name := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
	return fmt.Errorf("-o json: corral %s has no JSON form (commands with one: %s); leave -o out", name, strings.Join(jsonCommands(cmd.Root()), ", "))
}

// jsonCommands lists the commands with a JSON form.
func jsonCommands(root *cobra.Command) []string {
	var out []string
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Annotations[annJSON] != "" {
			out = append(out, strings.TrimPrefix(c.CommandPath(), root.Name()+" "))
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return out
}

// flagError turns cobra's "unknown shorthand flag: 'o'" on a command
// without an -o flag into the same refusal as checkJSONForm's.
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	if strings.Contains(msg, "unknown shorthand flag: 'o'") || strings.Contains(msg, "unknown flag: --output") {
		return noJSONForm(cmd)
	}
	return err
}
