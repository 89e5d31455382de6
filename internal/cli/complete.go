package cli

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/apply"
	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/plan"
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

// manifestFiles are the files -f names on cmd (the manifest and its
// override files), corral.yaml when it has no -f.
func manifestFiles(cmd *cobra.Command) []string {
	if f := cmd.Flags().Lookup("file"); f != nil {
		if v, ok := f.Value.(*filesValue); ok {
			return v.ff.files()
		}
		return []string{f.Value.String()}
	}
	return []string{"corral.yaml"}
}

// appNames are the manifest's apps starting with prefix, less those in
// args already.
func appNames(cmd *cobra.Command, args []string, prefix string) []string {
	m, err := manifest.LoadFiles(manifestFiles(cmd), manifest.LoadOptions{Lazy: true})
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

// completionTimeout bounds how long a completion may read the cluster: a
// shell waiting on a slow or unreachable endpoint is worse than no list.
// CORRAL_COMPLETION_TIMEOUT (a Go duration, e.g. 10s) changes it for a
// cluster that answers slowly.
func completionTimeout() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("CORRAL_COMPLETION_TIMEOUT")); err == nil && d > 0 {
		return d
	}
	return 3 * time.Second
}

// fromCluster runs list against the cluster that cmd's flags (or the
// environment, or the local emulator if it runs) point at, quietly: nothing on
// stderr, no error, nothing at all after completionTimeout().
func fromCluster(cmd *cobra.Command, list func(ctx context.Context, s *session) ([]string, error)) []string {
	var cf connFlags
	get := func(name string) string {
		if f := cmd.Flags().Lookup(name); f != nil {
			return f.Value.String()
		}
		return ""
	}
	cf.endpoint, cf.token, cf.fingerprint, cf.caFile = get("endpoint"), get("api-token"), get("fingerprint"), get("ca-file")
	cf.insecure, _ = strconv.ParseBool(get("insecure"))
	cf.plainHTTP, _ = strconv.ParseBool(get("insecure-plain-http"))
	// The emulator and the client log through slog; a completion prints
	// nothing but its candidates.
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout())
	defer cancel()
	quiet := &streams{in: strings.NewReader(""), out: io.Discard, err: io.Discard}
	s, err := connectTo(ctx, quiet, cf, false) // a completion starts no emulator
	if err != nil {
		return nil
	}
	defer s.Close()
	out, err := list(ctx, s)
	if err != nil {
		return nil
	}
	return out
}

// withPrefix keeps the candidates that start with prefix and are not in
// args already.
func withPrefix(cands, args []string, prefix string) []string {
	var out []string
	for _, c := range cands {
		if strings.HasPrefix(c, prefix) && !contains(args, c) {
			out = append(out, c)
		}
	}
	return out
}

// completeVolumeIDs completes `corral volumes rm`: the volumes the keepers
// hold, of the manifest's project when -f names a readable one.
func completeVolumeIDs(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	project := ""
	if cmd.Flags().Lookup("file") != nil {
		if m, err := manifest.LoadFiles(manifestFiles(cmd), manifest.LoadOptions{Lazy: true}); err == nil {
			project = m.Project
		}
	}
	ids := fromCluster(cmd, func(ctx context.Context, s *session) ([]string, error) {
		obs, err := apply.Observe(ctx, s.client)
		if err != nil {
			return nil, err
		}
		var ids []string
		for _, v := range plan.Inventory(obs) {
			if project == "" || v.Project == "" || v.Project == project {
				ids = append(ids, v.VolID)
			}
		}
		return ids, nil
	})
	return withPrefix(ids, args, toComplete), cobra.ShellCompDirectiveNoFileComp
}

// completeArchives completes restore's --archive: the backups of the app
// named first (of every app when none is yet).
func completeArchives(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	app := ""
	if len(args) > 0 {
		app = args[0]
	}
	ids := fromCluster(cmd, func(ctx context.Context, s *session) ([]string, error) {
		obs, err := apply.Observe(ctx, s.client)
		if err != nil {
			return nil, err
		}
		list, err := apply.ListBackups(ctx, s.client, obs, app)
		if err != nil {
			return nil, err
		}
		var ids []string
		for _, a := range list {
			ids = append(ids, a.VolID)
		}
		return ids, nil
	})
	return withPrefix(ids, nil, toComplete), cobra.ShellCompDirectiveNoFileComp
}

// completeAppThenSnapshot completes APP, then the snapshot names of that
// app's container (rollback APP NAME, snapshot APP --delete NAME).
func completeAppThenSnapshot(snapshotArg func(cmd *cobra.Command) bool) func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		switch {
		case len(args) == 0:
			return appNames(cmd, args, toComplete), cobra.ShellCompDirectiveNoFileComp
		case len(args) > 1 || !snapshotArg(cmd):
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		names := fromCluster(cmd, func(ctx context.Context, s *session) ([]string, error) {
			obs, err := apply.Observe(ctx, s.client)
			if err != nil {
				return nil, err
			}
			snaps, err := appSnapshots(ctx, s, obs, args[0])
			if err != nil {
				return nil, err
			}
			var names []string
			for _, sn := range snaps {
				if sn.Name != "current" {
					names = append(names, sn.Name)
				}
			}
			return names, nil
		})
		return withPrefix(names, nil, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// appSnapshots lists the snapshots of app's container or, for a kind: vm
// app, its VM.
func appSnapshots(ctx context.Context, s *session, obs *plan.Observed, app string) ([]apply.SnapshotInfo, error) {
	if apply.IsVMApp(obs, app) {
		vm, err := apply.AppVM(obs, app)
		if err != nil {
			return nil, err
		}
		return apply.ListVMSnapshots(ctx, s.client, vm)
	}
	ct, err := apply.AppCT(obs, app)
	if err != nil {
		return nil, err
	}
	return apply.ListSnapshots(ctx, s.client, ct)
}
