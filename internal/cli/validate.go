package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/ui"
)

func newValidateCmd(st *streams) *cobra.Command {
	var ff fileFlags
	cmd := &cobra.Command{
		Use:         "validate",
		Annotations: jsonForm(),
		Short:       "Check the manifest without contacting any cluster",
		Long: `validate reads the manifest, resolves its ${env:…} and ${file:…}
references and reports every problem as FILE:LINE:COL with what is
allowed. Exit status 0 when valid, 1 when not. With several -f, the
later files are merged over the first (override files) and the merged
manifest is checked.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			asJSON, err := ff.json()
			if err != nil {
				return err
			}
			ctx, cancel := readOnly(cmd.Context())
			defer cancel()
			f, err := interruptible(ctx, func() (*manifest.File, error) { return ff.load(false) })
			if errors.Is(err, context.Canceled) { // interrupted: no verdict to print
				return err
			}
			if asJSON {
				if werr := writeJSON(st, ui.NewValidationJSON(ff.path, ff.files(), f, err)); werr != nil {
					return werr
				}
				if err != nil {
					return &exitError{code: ExitError}
				}
				return nil
			}
			if err != nil {
				return err
			}
			ui.WriteValid(st.out, ff.named(), len(f.Apps))
			return nil
		},
	}
	ff.add(cmd.Flags())
	return cmd
}

func newSchemaCmd(st *streams) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:         "schema",
		Annotations: jsonForm(),
		Short:       "Print the JSON Schema of corral.yaml, for editors",
		Long: `schema prints a JSON Schema (draft 2020-12) of the manifest. Point your
editor's YAML language server at it, e.g. with a first line
  # yaml-language-server: $schema=./corral.schema.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "json" {
				return fmt.Errorf("--output %q: the schema is JSON only", output)
			}
			_, err := st.out.Write(manifest.JSONSchema())
			return err
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "json", "output format: json (the only one)")
	return cmd
}
