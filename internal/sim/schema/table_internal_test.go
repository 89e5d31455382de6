package schema

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/corralhq/corral/internal/testutil/refdata"
)

// TestTableUpToDate regenerates each table from the API dumps and compares
// it with the embedded one. Run "go generate ./internal/sim/schema" when
// it fails.
func TestTableUpToDate(t *testing.T) {
	shared := refdata.Dir(t)
	for _, version := range Versions {
		t.Run(version, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(shared, "pve-api", SourceFiles[version]))
			if err != nil {
				t.Fatal(err)
			}
			want, err := Reduce(raw, version)
			if err != nil {
				t.Fatal(err)
			}
			got, err := tableJSON(version)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("tables/%s.json.gz is stale (%d bytes, fresh reduction %d): run go generate ./internal/sim/schema",
					version, len(got), len(want))
			}
		})
	}
}

// TestTableRoundTrip decodes each table into the runtime types and encodes
// it again: the bytes must not change, so no fact is lost between the
// generator's encoding and Load's decoding.
func TestTableRoundTrip(t *testing.T) {
	for _, version := range Versions {
		t.Run(version, func(t *testing.T) {
			raw, err := tableJSON(version)
			if err != nil {
				t.Fatal(err)
			}
			var tb table
			if err := json.Unmarshal(raw, &tb); err != nil {
				t.Fatal(err)
			}
			again, err := json.Marshal(&tb)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(raw, again) {
				t.Fatalf("table %s changes on a decode/encode round trip", version)
			}
		})
	}
}

// TestFixtureParamError reproduces fixtures/error-400-param.json.
func TestFixtureParamError(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(refdata.Dir(t), "pve-api", "fixtures", "error-400-param.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fixture struct {
		Body struct {
			Message string            `json:"message"`
			Errors  map[string]string `json:"errors"`
		} `json:"body"`
	}
	if err := json.Unmarshal(raw, &fixture); err != nil {
		t.Fatal(err)
	}
	a, err := Load("9.1")
	if err != nil {
		t.Fatal(err)
	}
	m, params, ok := a.Lookup("PUT", "/nodes/pve/lxc/101/config")
	if !ok {
		t.Fatal("no PUT config")
	}
	params["mp0"] = "local-lvm:8"
	verr := m.Validate(params)
	pe, ok := verr.(*ParamError)
	if !ok {
		t.Fatalf("Validate = %v, want *ParamError", verr)
	}
	if got, want := ParamErrorMessage, fixture.Body.Message; got != want {
		t.Errorf("ParamErrorMessage=%q, fixture has %q", got, want)
	}
	if len(pe.Errors) != len(fixture.Body.Errors) || pe.Errors["mp0"] != fixture.Body.Errors["mp0"] {
		t.Errorf("errors=%q, fixture has %q", pe.Errors, fixture.Body.Errors)
	}
}
