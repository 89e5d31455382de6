package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/corralhq/corral/internal/guest"
	"github.com/corralhq/corral/internal/manifest"
	"github.com/corralhq/corral/internal/tarcp"
	"github.com/corralhq/corral/internal/ui"
)

func newCpCmd(st *streams) *cobra.Command {
	var ff fileFlags
	var cf connFlags
	var trust bool
	var owner string
	cmd := &cobra.Command{
		Use:   "cp SRC DEST",
		Short: "Copy files and directories between this machine and an app's container",
		Long: `cp copies a file or a directory tree into an app's container or out of it,
as kubectl cp and docker compose cp do. One side is APP:/absolute/path.

  corral cp ./site hello:/srv/data          ./site becomes /srv/data/site (/srv/data exists)
  corral cp ./index.html hello:/srv/new.html
  corral cp hello:/etc/hermes ./backup      /etc/hermes becomes ./backup/hermes, or ./backup when it does not exist

Directories are copied recursively; permission bits, modification times
and symlinks are kept. Copies into the container are owned by root unless
--owner names a user (and group). Copies out are owned by you.

What comes back from a container is not trusted: names with "..",
absolute names, hard links, device files and symlinks that are absolute
or point outside the copy are refused, and nothing is ever written outside
the destination.

It runs tar in the container over SSH (the path of corral exec), so the
container needs tar, as every template has.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCp(cmd.Context(), st, ff, cf, trust, owner, args[0], args[1])
		},
	}
	ff.add(cmd.Flags())
	cf.add(cmd.Flags())
	cmd.Flags().BoolVar(&trust, "trust-host-key", false, "accept the container's SSH host key if corral has none pinned")
	cmd.Flags().StringVar(&owner, "owner", "", "USER[:GROUP] to own what is copied into the container (default root)")
	cmd.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) >= 2 || strings.Contains(toComplete, ":") {
			return nil, cobra.ShellCompDirectiveDefault
		}
		var out []string
		for _, a := range appNames(cmd, nil, toComplete) {
			out = append(out, a+":/")
		}
		return out, cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveDefault
	}
	return cmd
}

// guestPath is one side of cp: APP:PATH, or a local path when app is "".
type guestPath struct {
	app, path string
}

// parseCpArg reads APP:PATH when the part before the first colon is an
// app of the manifest; anything else is a local path (write ./a:b for a
// local file whose name has a colon).
func parseCpArg(f *manifest.File, arg string) (guestPath, error) {
	app, p, ok := strings.Cut(arg, ":")
	if !ok || app == "" || strings.ContainsRune(app, '/') {
		return guestPath{path: arg}, nil
	}
	if _, known := f.App(app); !known {
		return guestPath{path: arg}, nil
	}
	if !strings.HasPrefix(p, "/") {
		return guestPath{}, fmt.Errorf("%s: write the path in the container as an absolute path (%s:/…)", arg, app)
	}
	return guestPath{app: app, path: p}, nil
}

func runCp(ctx context.Context, st *streams, ff fileFlags, cf connFlags, trust bool, owner, srcArg, destArg string) error {
	f, err := ff.load(true) // only the app names are needed: no secret is read
	if err != nil {
		return err
	}
	src, err := parseCpArg(f, srcArg)
	if err != nil {
		return err
	}
	dest, err := parseCpArg(f, destArg)
	if err != nil {
		return err
	}
	switch {
	case src.app == "" && dest.app == "":
		return fmt.Errorf("cp %s %s: neither side is APP:/path (apps in %s: %s)", srcArg, destArg, ff.path, strings.Join(appNamesOf(f), ", "))
	case src.app != "" && dest.app != "":
		return errors.New("cp: both sides are in containers; copy out to this machine and back in")
	case src.app != "" && owner != "":
		return errors.New("cp --owner: applies to copies into a container; files copied out are owned by you")
	}
	if src.app == "" {
		return cpIn(ctx, st, ff, cf, trust, owner, src.path, dest)
	}
	return cpOut(ctx, st, ff, cf, trust, src, dest.path)
}

func appNamesOf(f *manifest.File) []string {
	var names []string
	for _, a := range f.Apps {
		names = append(names, a.Name)
	}
	return names
}

// cpIn copies the local file or tree at local into the container: into
// dest.path when it is a directory there, else as dest.path.
func cpIn(ctx context.Context, st *streams, ff fileFlags, cf connFlags, trust bool, owner, local string, dest guestPath) error {
	resolved, err := filepath.EvalSymlinks(local)
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	fi, err := os.Stat(resolved)
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	if !fi.IsDir() && !fi.Mode().IsRegular() {
		return fmt.Errorf("cp: %s is not a file or a directory", local)
	}
	base := filepath.Base(filepath.Clean(local))
	q := guest.ShellQuote
	script := "set -e; d=" + q(dest.path) + "; b=" + q(base) + "\n"
	if strings.HasSuffix(dest.path, "/") {
		script += `mkdir -p -- "$d"` + "\n"
	}
	script += `if [ -d "$d" ]; then t="${d%/}/$b"; else t="$d"; fi` + "\n"
	script += `mkdir -p -- "$(dirname -- "$t")"` + "\n"
	if fi.IsDir() {
		script += `mkdir -p -- "$t"; tar -x -p --no-same-owner -f - -C "$t"` + "\n"
	} else {
		script += `tar -x -O -f - > "$t"; chmod ` + fmt.Sprintf("%o", fi.Mode().Perm()) + ` -- "$t"` + "\n"
	}
	if owner != "" {
		script += "chown -R -h -- " + q(owner) + ` "$t"` + "\n"
	}
	script += `printf '%s' "$t"`
	name := "."
	if !fi.IsDir() {
		name = base
	}
	pr, pw := io.Pipe()
	packed := make(chan error, 1)
	go func() {
		err := tarcp.Pack(pw, resolved, name, func(p string) {
			ui.WriteCopySkipped(st.err, p)
		})
		pw.CloseWithError(err)
		packed <- err
	}()
	var out, errb bytes.Buffer
	err = withGuest(ctx, st, ff, cf, trust, dest.app, func(cl *guest.Client) error {
		return cl.Pipe(ctx, guest.Pipe{Script: script, Stdin: pr, Stdout: &out, Stderr: &errb})
	})
	pr.CloseWithError(errCopyEnded) // a Pack still writing stops
	if perr := <-packed; perr != nil && !errors.Is(perr, errCopyEnded) && err != nil {
		return fmt.Errorf("cp: read %s: %w", local, perr)
	}
	if err != nil {
		return cpFailed(err, errb.String())
	}
	ui.WriteCopied(st.err, local, dest.app+":"+out.String())
	return nil
}

// cpOut copies the container's file or tree at src.path to local: into
// local when it is a directory, else as local (whose parent must exist).
func cpOut(ctx context.Context, st *streams, ff fileFlags, cf connFlags, trust bool, src guestPath, local string) error {
	clean := path.Clean(src.path)
	if clean == "/" {
		return errors.New("cp: copying a container's whole root file system is not supported; name a directory")
	}
	top := path.Base(clean)
	dir, name := local, top
	if fi, err := os.Stat(local); err != nil || !fi.IsDir() {
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("cp: %w", err)
		}
		dir, name = filepath.Dir(local), filepath.Base(local)
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return fmt.Errorf("cp: %s: the directory %s does not exist", local, dir)
		}
	}
	q := guest.ShellQuote
	script := "s=" + q(clean) + `; if [ ! -e "$s" ] && [ ! -L "$s" ]; then echo "$s: no such file or directory" >&2; exit 1; fi; ` +
		`cd "$(dirname -- "$s")" && exec tar -c -f - -- ` + q(top)
	pr, pw := io.Pipe()
	unpacked := make(chan error, 1)
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		err := tarcp.Unpack(pr, top, dir, name)
		if err != nil {
			cancel() // the guest's tar is killed: the copy stopped here
		}
		io.Copy(io.Discard, pr) // what is left, so the session never blocks
		unpacked <- err
	}()
	var errb bytes.Buffer
	err := withGuest(runCtx, st, ff, cf, trust, src.app, func(cl *guest.Client) error {
		return cl.Pipe(runCtx, guest.Pipe{Script: script, Stdout: pw, Stderr: &errb})
	})
	pw.Close()
	uerr := <-unpacked
	if uerr != nil {
		return fmt.Errorf("cp %s:%s: %w", src.app, src.path, uerr)
	}
	if err != nil {
		return cpFailed(err, errb.String())
	}
	ui.WriteCopied(st.err, src.app+":"+src.path, filepath.Join(dir, name))
	return nil
}

var errCopyEnded = errors.New("the copy ended")

// cpFailed says why the guest's side failed, with what it printed.
func cpFailed(err error, stderr string) error {
	var ee *guest.ExitError
	if errors.As(err, &ee) {
		msg := strings.TrimSpace(stderr)
		if msg == "" {
			msg = ee.Error()
		}
		return fmt.Errorf("cp: in the container: %s", msg)
	}
	return err
}
