package bench

import "testing"

func TestKindsOf(t *testing.T) {
	got := kindsOf(map[string]int{
		"GET /nodes/{node}/tasks/{upid}/status": 7,
		"GET /nodes/{node}/tasks/{upid}/log":    2,
		"GET /nodes/{node}/tasks":               1,
		"GET /nodes/{node}/lxc/{vmid}/config":   3,
		"GET /cluster/resources":                4,
		"GET /nodes/{node}/taskset":             1, // not a task read
		"POST /nodes/{node}/lxc":                1,
		"PUT /nodes/{node}/lxc/{vmid}/config":   5,
		"DELETE /nodes/{node}/tasks/{upid}":     1, // stopping a task is a write
	})
	want := Kinds{Polls: 10, Reads: 8, Writes: 7}
	if got != want {
		t.Fatalf("kindsOf = %+v, want %+v", got, want)
	}
}
