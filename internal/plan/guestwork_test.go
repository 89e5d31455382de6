package plan

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/manifest"
)

// guestFixture is an app with every kind of step and check, every field
// set.
func guestFixture() manifest.App {
	return manifest.App{
		Name: "hermes",
		Provision: []manifest.Step{
			{Kind: manifest.StepUser, Name: "user: hermes", Timeout: time.Minute, Account: manifest.Account{Name: "hermes", UID: 10000, Home: "/home/hermes", Shell: "/bin/sh", Groups: []string{"docker"}}},
			{Kind: manifest.StepRun, Name: "run: install", Timeout: 2 * time.Minute, Run: "echo install\n"},
			{Kind: manifest.StepFile, Name: "file: config", Path: "/etc/hermes/config.yaml", Content: "port: 1\n", Mode: 0o644, Owner: "hermes"},
			{Kind: manifest.StepEnvFile, Name: "envFile: .env", Path: "/home/hermes/.env", Mode: 0o600, Owner: "hermes:hermes",
				Env: []manifest.EnvVar{{Name: "API_KEY", Value: manifest.NewSecret("secret:api", "sk-1")}, {Name: "MODE", Value: manifest.NewSecret("", "prod")}}},
			{Kind: manifest.StepCompose, Name: "compose: app", Path: "/srv/compose.yaml", Content: "services: {}\n", Mode: 0o644, Project: "hermes",
				OnChange: []string{"envFile: .env"}, Restart: []string{"hermes.service"}, Pull: manifest.PullAlways},
		},
		Health: []manifest.Check{
			{Kind: "http", Name: "web", URL: "http://localhost:8080/", Expect: 200, Timeout: time.Second, Retries: 3, Interval: 2 * time.Second},
			{Kind: "tcp", Name: "port", Address: "localhost:22"},
			{Kind: "command", Name: "cmd", Command: "true"},
		},
	}
}

// TestGuestWorkHashesUnchanged: the digest and step checksums of the
// fixture are those the corral before GuestWork recorded, so an upgrade
// reruns no step and re-provisions no app.
func TestGuestWorkHashesUnchanged(t *testing.T) {
	w := GuestWorkOf(guestFixture())
	if d := w.Digest(); d != "d8d330f3851266e8" {
		t.Errorf("Digest = %s, want d8d330f3851266e8", d)
	}
	want := []string{
		"18a141630c77b16bab8d5f56b9c1c34e19acb705d15f4dc454c5704032e29587",
		"932511093f6eb7394963dec0b594b82d4b48d45b9c7d8ffa282f5961c7f4d367",
		"f60d7d97d99305e1af46b88cb36b8ad983bbea173cf6fabf477c7f160ad68360",
		"0313177eb2d67707fd2c7503a054d35a7f03500d2b8961532a955629f90c6fb2",
		"a6205cc94d25307e671f8eb4314171600b586b1c093b7df95806c5d6ca966658",
	}
	for i, s := range w.Steps {
		if got := s.Sum(); got != want[i] {
			t.Errorf("step %q: Sum = %s, want %s", s.Name, got, want[i])
		}
	}
}

// notInSum are the step fields GuestStep.Sum leaves out on purpose:
// changing them changes no file, so no step reruns (Digest has them).
var notInSum = map[string]bool{"Timeout": true, "OnChange": true, "Restart": true, "PullAlways": true, "Facts": true}

// TestDigestCoversEveryField changes every field of the guest work, one
// at a time, found by reflection (a field added later is covered without
// touching this test), and wants the digest to change; and every step
// field but notInSum to change the step's checksum. What apply runs is
// this same value, so a change that runs differently re-provisions.
func TestDigestCoversEveryField(t *testing.T) {
	base := GuestWorkOf(guestFixture())
	paths := leaves(reflect.ValueOf(&base).Elem(), nil)
	if len(paths) < 30 {
		t.Fatalf("found only %d fields to change: %v", len(paths), paths)
	}
	for _, p := range paths {
		if p[0].field == "Rerun" {
			continue // a request for one apply, not what the guest holds
		}
		w := GuestWorkOf(guestFixture())
		v := reflect.ValueOf(&w).Elem()
		for _, s := range p {
			v = s.walk(v)
		}
		change(t, v)
		if w.Digest() == base.Digest() {
			t.Errorf("changing %s leaves the digest unchanged", pathString(p))
		}
		if p[0].field == "Steps" && len(p) > 2 && !notInSum[p[2].field] {
			i := p[1].index
			if w.Steps[i].Sum() == base.Steps[i].Sum() {
				t.Errorf("changing %s leaves the step's checksum unchanged", pathString(p))
			}
		}
	}
}

// hop is one move into a value: a struct field, a slice element or a
// pointer's target.
type hop struct {
	field string // "" for an index or a pointer
	index int
	deref bool
}

func (h hop) walk(v reflect.Value) reflect.Value {
	switch {
	case h.deref:
		return v.Elem()
	case h.field != "":
		return v.FieldByName(h.field)
	}
	return v.Index(h.index)
}

func pathString(p []hop) string {
	s := ""
	for _, h := range p {
		switch {
		case h.field != "":
			s += "." + h.field
		case !h.deref:
			s += fmt.Sprintf("[%d]", h.index)
		}
	}
	return s
}

var secretType = reflect.TypeFor[manifest.Secret]()

// leaves lists the paths to every changeable value under v: scalars,
// secrets, slices (changed by appending) and every slice element's own
// leaves. A nil pointer is a field the step's kind does not use.
func leaves(v reflect.Value, at []hop) [][]hop {
	with := func(h hop) []hop { return append(append([]hop(nil), at...), h) }
	switch {
	case v.Type() == secretType:
		return [][]hop{at}
	case v.Kind() == reflect.Struct:
		var out [][]hop
		for i := range v.NumField() {
			f := v.Type().Field(i)
			out = append(out, leaves(v.Field(i), with(hop{field: f.Name}))...)
		}
		return out
	case v.Kind() == reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return leaves(v.Elem(), with(hop{deref: true}))
	case v.Kind() == reflect.Slice:
		out := [][]hop{at}
		for i := range v.Len() {
			out = append(out, leaves(v.Index(i), with(hop{index: i}))...)
		}
		return out
	}
	return [][]hop{at}
}

// change sets v to a different value of its type.
func change(t *testing.T, v reflect.Value) {
	t.Helper()
	if v.Type() == secretType {
		v.Set(reflect.ValueOf(manifest.NewSecret("", v.Interface().(manifest.Secret).Reveal()+"x")))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Int, reflect.Int64:
		v.SetInt(v.Int() + 1)
	case reflect.Uint32:
		v.SetUint(v.Uint() + 1)
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Slice:
		e := reflect.New(v.Type().Elem()).Elem()
		if e.Kind() == reflect.String {
			e.SetString("x")
		}
		v.Set(reflect.Append(v, e))
	default:
		t.Fatalf("no way to change a %s: teach change() about it", v.Type())
	}
}
