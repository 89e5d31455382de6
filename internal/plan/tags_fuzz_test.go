package plan

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// FuzzParseTags: PVE's tag string parses to sorted, unique, non-empty
// tags without separators, no more than the input's bytes, and printing
// them back (';'-joined, as PVE stores them) reads the same; and a user
// tag the manifest check accepts never yields one of corral's own tags
// (corral finds its containers by them: a planted corral-app-x would make
// corral adopt a stranger's container).
func FuzzParseTags(f *testing.F) {
	for _, s := range fuzzParseTagsSeeds {
		f.Add(s.pve, s.user)
	}
	f.Fuzz(checkParseTags)
}

var fuzzParseTagsSeeds = []struct{ pve, user string }{
	{"corral;corral-app-notes;corral-project-demo", "prod"},
	{"b,a a;;c", "Web_1"},
	{"corral-keeper", "x.y+z"},
	{"", "CORRAL"},
	{" ; , ", "corral-app-evil"},
	{"日本;é", "Corral-x"},
}

// The manifest's pattern for a user tag and its reserved form
// (internal/manifest/spec.go).
var (
	fuzzUserTagRE     = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9_+.-]*$`)
	fuzzReservedTagRE = regexp.MustCompile(`^[cC][oO][rR][rR][aA][lL](-.*)?$`)
)

func checkParseTags(t *testing.T, s, user string) {
	tags := ParseTags(s)
	if len(tags) > len(s) {
		t.Fatalf("ParseTags(%q): %d tags", s, len(tags))
	}
	for i, tag := range tags {
		if tag == "" || strings.ContainsAny(tag, ";, ") || (i > 0 && tags[i-1] >= tag) {
			t.Fatalf("ParseTags(%q) = %q: empty, unsorted, repeated or with a separator", s, tags)
		}
	}
	if again := ParseTags(strings.Join(tags, ";")); !slices.Equal(again, tags) {
		t.Fatalf("ParseTags(%q) = %q, printed back reads %q", s, tags, again)
	}
	if !fuzzUserTagRE.MatchString(user) || fuzzReservedTagRE.MatchString(user) {
		return
	}
	got := ParseTags(strings.Join(AppTags(App{Name: "notes", Project: "demo", Tags: []string{user}}), ";"))
	var ours []string
	for _, tag := range got {
		if tag == TagManaged || strings.HasPrefix(tag, TagManaged+"-") {
			ours = append(ours, tag)
		}
	}
	if want := []string{TagManaged, TagAppPrefix + "notes", TagProjectPrefix + "demo"}; !slices.Equal(ours, want) {
		t.Fatalf("user tag %q: corral's tags read back as %q, want %q", user, ours, want)
	}
}

// FuzzParseKeeperMountPath: a keeper mount path reads back as the app and
// volume it was made of, and nothing else reads as one.
func FuzzParseKeeperMountPath(f *testing.F) {
	for _, s := range []string{"/corral/notes/data", "/corral/a/b/c", "/corral//x", "/srv/data", "/corral/notes/", "corral/a/b"} {
		f.Add(s)
	}
	f.Fuzz(checkParseKeeperMountPath)
}

func checkParseKeeperMountPath(t *testing.T, p string) {
	k, ok := ParseKeeperMountPath(p)
	if !ok {
		if k != (VolumeKey{}) {
			t.Fatalf("ParseKeeperMountPath(%q) = %+v, false", p, k)
		}
		return
	}
	if k.App == "" || k.Name == "" || strings.Contains(k.App+k.Name, "/") || "/corral/"+k.App+"/"+k.Name != p {
		t.Fatalf("ParseKeeperMountPath(%q) = %+v", p, k)
	}
}
