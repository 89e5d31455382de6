package model

import (
	"reflect"
	"testing"
)

// narrowParts are the parts of Cluster, by field name, that reach the
// rest of the cluster only through fields of their own (the State's
// lock, the State, interfaces over the other parts), never through the
// *Cluster they are part of (issue 29). A part added here must keep to
// that.
var narrowParts = []string{"accessControl", "persistence", "storage", "taskRunner", "clusterView", "guests", "ctSnapshots", "ctDestroyer", "ctMigrator", "vzdump", "ctDisks", "ctPower", "ctConfig", "ctCreator", "ha", "pools", "fwConfig", "fwAliases", "fwIPSets", "fwRules", "fwGroups", "vmCreator", "vmConfig", "vmDestroyer", "vmDisks", "vmCloner", "vmRestorer", "vmSnapshots", "vmMigrator", "vmPower"}

// clusterHandles are the fields of narrow parts allowed to hold the
// *Cluster, each for a reason its doc comment gives: taskRunner hands it
// to every Worker, whose steps act on all parts.
var clusterHandles = map[string]bool{"taskRunner.cluster": true}

// TestParts_reachNoCluster: a narrow part holds no *Cluster, neither as
// a field nor behind one of its interfaces, so its methods cannot call
// the other parts through Cluster.
func TestParts_reachNoCluster(t *testing.T) {
	t.Parallel()
	c := newCluster(Options{Dir: t.TempDir(), Nodes: 1, Version: "9.1", TimeScale: 1})
	defer c.cancel()
	cv := reflect.ValueOf(c).Elem()
	for _, name := range narrowParts {
		part := cv.FieldByName(name)
		if !part.IsValid() || part.Kind() != reflect.Struct {
			t.Errorf("Cluster has no part %s", name)
			continue
		}
		for _, f := range clusterFields(part, name) {
			if !clusterHandles[f] {
				t.Errorf("%s holds the *Cluster: give the part a narrow interface over what it needs instead", f)
			}
		}
	}
}

// clusterFields are the fields of part, named path.field, that hold the
// *Cluster, as a pointer or behind an interface, looking inside the
// struct fields it has by value (the firewall parts' embedded fwParts).
func clusterFields(part reflect.Value, path string) []string {
	clusterPtr := reflect.TypeFor[*Cluster]()
	var out []string
	for i := range part.NumField() {
		f, v := part.Type().Field(i), part.Field(i)
		switch {
		case f.Type == clusterPtr,
			f.Type.Kind() == reflect.Interface && !v.IsNil() && v.Elem().Type() == clusterPtr:
			out = append(out, path+"."+f.Name)
		case f.Type.Kind() == reflect.Struct:
			out = append(out, clusterFields(v, path+"."+f.Name)...)
		}
	}
	return out
}
