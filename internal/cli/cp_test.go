package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/testenv"
)

// TestCp copies a tree into a container and back out through the CLI,
// over SSH to the emulator: modes, symlinks and empty directories kept,
// the docker cp rules for an existing or new destination, --owner, and
// the refusal of what a container could send to escape the destination.
func TestCp(t *testing.T) {
	t.Parallel()
	testenv.NeedRoot(t, "the emulator's guest view")
	c, _, conn := guestApp(t)
	cp := func(args ...string) result {
		return c.run(append(append([]string{"cp"}, args...), conn...)...)
	}
	sh := func(script string) string {
		t.Helper()
		r := c.run(append(append([]string{"exec", "notes"}, conn...), "--", "sh", "-c", script)...)
		if r.code != 0 {
			t.Fatalf("exec %q: exit %d\n%s", script, r.code, r.stderr)
		}
		return r.stdout
	}

	local := t.TempDir()
	site := filepath.Join(local, "site")
	os.MkdirAll(filepath.Join(site, "sub", "empty"), 0o755)
	os.WriteFile(filepath.Join(site, "index.html"), []byte("hello\n"), 0o644)
	os.WriteFile(filepath.Join(site, "run.sh"), []byte("#!/bin/sh\necho ran\n"), 0o755)
	os.WriteFile(filepath.Join(site, "sub", "secret"), []byte("s3\n"), 0o600)
	os.Symlink("index.html", filepath.Join(site, "link"))
	os.Chmod(filepath.Join(site, "sub"), 0o700)

	// A directory into an existing directory lands inside it.
	if r := cp(site, "notes:/srv/data"); r.code != 0 || !strings.Contains(r.stderr, "to notes:/srv/data/site") {
		t.Fatalf("cp in: exit %d\n%s", r.code, r.stderr)
	}
	got := sh("cd /srv/data/site && stat -c '%a %U %F %n' index.html run.sh sub sub/secret sub/empty link && readlink link && ./run.sh")
	want := "644 root regular file index.html\n755 root regular file run.sh\n700 root directory sub\n600 root regular file sub/secret\n755 root directory sub/empty\n777 root symbolic link link\nindex.html\nran\n"
	if got != want {
		t.Errorf("in the container:\n%s\nwant:\n%s", got, want)
	}
	// A file to a new name, and with --owner.
	if r := cp(filepath.Join(site, "run.sh"), "notes:/srv/data/renamed.sh", "--owner", "nobody"); r.code != 0 {
		t.Fatalf("cp file: exit %d\n%s", r.code, r.stderr)
	}
	if got := sh("stat -c '%a %U' /srv/data/renamed.sh"); got != "755 nobody\n" {
		t.Errorf("renamed.sh: %q, want 755 nobody", got)
	}

	// Out again: into an existing directory, and to a new name.
	if r := cp("notes:/srv/data/site", local+"/"); r.code != 0 {
		// local already has site: the copy merges into it
		t.Fatalf("cp out: exit %d\n%s", r.code, r.stderr)
	}
	back := filepath.Join(local, "back")
	if r := cp("notes:/srv/data/site", back); r.code != 0 {
		t.Fatalf("cp out to a new name: exit %d\n%s", r.code, r.stderr)
	}
	for _, tc := range []struct {
		name string
		mode os.FileMode
	}{{"index.html", 0o644}, {"run.sh", 0o755}, {"sub", os.ModeDir | 0o700}, {"sub/secret", 0o600}, {"sub/empty", os.ModeDir | 0o755}, {"link", os.ModeSymlink | 0o777}} {
		fi, err := os.Lstat(filepath.Join(back, tc.name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != tc.mode {
			t.Errorf("back/%s: %v, want %v", tc.name, fi.Mode(), tc.mode)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(back, "sub", "secret")); string(b) != "s3\n" {
		t.Errorf("back/sub/secret = %q", b)
	}
	if r := cp("notes:/srv/data/renamed.sh", filepath.Join(local, "one.sh")); r.code != 0 {
		t.Fatalf("cp a file out: exit %d\n%s", r.code, r.stderr)
	}
	if fi, err := os.Stat(filepath.Join(local, "one.sh")); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("one.sh: %v %v", fi, err)
	}

	// What a container could use to escape the destination is refused.
	sh("mkdir -p /srv/data/evil && ln -sf /etc/passwd /srv/data/evil/passwd && mkdir -p /srv/data/up && ln -sf ../../.. /srv/data/up/root")
	for _, tc := range []struct{ src, leaf, why string }{
		{"notes:/srv/data/evil", "passwd", "absolute path"},
		{"notes:/srv/data/up", "root", "outside the copy"},
	} {
		out := t.TempDir()
		r := cp(tc.src, out)
		if r.code != ExitError || !strings.Contains(r.stderr, "refused") || !strings.Contains(r.stderr, tc.why) {
			t.Errorf("cp %s: exit %d, want a refusal (%s)\n%s", tc.src, r.code, tc.why, r.stderr)
		}
		if _, err := os.Lstat(filepath.Join(out, filepath.Base(tc.src[len("notes:"):]), tc.leaf)); err == nil {
			t.Errorf("cp %s wrote the unsafe link", tc.src)
		}
	}

	// Mistakes say what to write.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{site, filepath.Join(local, "x")}, "neither side is APP:/path"},
		{[]string{"notes:/nope", local}, "no such file or directory"},
		{[]string{"notes:relative", local}, "absolute path"},
		{[]string{"notes:/srv/data/site", local, "--owner", "nobody"}, "copies into a container"},
		{[]string{site, "notes:/srv/data", "-o", "json"}, "no JSON form"},
	} {
		if r := cp(tc.args...); r.code != ExitError || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("cp %v: exit %d, want %q\n%s", tc.args, r.code, tc.want, r.stderr)
		}
	}
}
