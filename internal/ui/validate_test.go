package ui

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/corralhq/corral/internal/manifest"
)

// TestNewValidationJSON: validate -o json's document, key for key as it
// was when a map built it (keys sorted; a manifest with no apps gives
// null, as it always did).
func TestNewValidationJSON(t *testing.T) {
	files := []string{"corral.yaml", "o.yaml"}
	tests := []struct {
		name string
		f    *manifest.File
		err  error
		want string
	}{
		{"valid", &manifest.File{Apps: []manifest.App{{Name: "web"}, {Name: "db"}}}, nil,
			`{"apps":["web","db"],"file":"corral.yaml","files":["corral.yaml","o.yaml"],"problems":[],"valid":true}`},
		{"no apps", &manifest.File{}, nil,
			`{"apps":null,"file":"corral.yaml","files":["corral.yaml","o.yaml"],"problems":[],"valid":true}`},
		{"not read", nil, errors.New("open corral.yaml: no such file"),
			`{"apps":[],"file":"corral.yaml","files":["corral.yaml","o.yaml"],"problems":["open corral.yaml: no such file"],"valid":false}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(NewValidationJSON("corral.yaml", files, tt.f, tt.err))
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Errorf("got  %s\nwant %s", b, tt.want)
			}
		})
	}
}
