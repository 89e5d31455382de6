package plan

import (
	"maps"
	"testing"

	"github.com/corralhq/corral/internal/manifest"
)

// FuzzDescriptionMarkers: user text can never produce a corral marker.
// Whatever description the manifest check accepts reads back as no marker
// on its own, and inside the description corral writes (AppDescription,
// then the guest markers) it changes none of corral's own; and whatever
// the parser reads as a marker, the check refuses.
func FuzzDescriptionMarkers(f *testing.F) {
	for _, s := range fuzzDescriptionMarkersSeeds {
		f.Add(s)
	}
	f.Fuzz(checkDescriptionMarkers)
}

var fuzzDescriptionMarkersSeeds = []string{
	"My app.",
	"My app.\ncorral-app: b\n",
	"\u00a0corral-hostkey: ssh-ed25519 AAAA",
	"\u200bcorral-provisioned: 0123",
	"x\rcorral-hostkey: ssh-ed25519 AAAA",
	"x\u2028corral-app: evil",
	"\ufeffCORRAL-volume: a/b=local:1",
	"\u3000\u2003corral-adopting: a/b=s>unused0",
	"managed by corral; lines starting with 'corral-' are read back by corral",
	"Corral-hostkey: x",
	"\x85corral-template: t",
	"\xffcorral-app: x",
	"corral-declared: h:/elsewhere/corral.yaml",
	" corral-declared: web=0123456789ab",
}

func checkDescriptionMarkers(t *testing.T, s string) {
	parsed := ParseMarker(s) != Marker{} || len(ParseKeeperRecords(s)) > 0 || len(ParseKeeperIntents(s)) > 0 || len(ParseKeeperDeclared(s)) > 0
	problem := manifest.DescriptionProblem(s)
	if parsed && problem == "" {
		t.Fatalf("description %q: the check accepts it but it reads as corral's markers %+v %v %v", s, ParseMarker(s), ParseKeeperRecords(s), ParseKeeperIntents(s))
	}
	if problem != "" {
		return
	}
	a := App{Name: "web", Template: "local:vztmpl/debian-12-standard_12.12-1_amd64.tar.zst", Description: s, Origin: "h:/src/shop/app/corral.yaml"}
	want := Marker{App: a.Name, Template: a.Template, Declared: a.Origin}
	desc := AppDescription(a)
	if got := ParseMarker(desc); got != want {
		t.Fatalf("description %q: corral's description reads back as %+v, want %+v", s, got, want)
	}
	want.HostKey, want.Provisioned = "ssh-ed25519 AAAAC3Nz", "d1"
	if got := ParseMarker(WithGuestMarkers(desc, want.HostKey, want.Provisioned)); got != want {
		t.Fatalf("description %q: with guest markers reads back as %+v, want %+v", s, got, want)
	}
	want.HostKey, want.Provisioned = "", ""
	if got := ParseMarker(WithGuestMarkers(desc, "", "")); got != want {
		t.Fatalf("description %q: with no guest markers reads back as %+v, want %+v", s, got, want)
	}
	if got := ParseKeeperRecords(desc); !maps.Equal(got, map[VolumeKey]string{}) {
		t.Fatalf("description %q: reads as keeper records %v", s, got)
	}
}
