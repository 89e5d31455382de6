//go:build race

package memcap

// Race is set under -race, whose instrumentation makes the code allocate
// far more than it does in a normal build (10,000 apps' plan: 114 MiB
// without, 314 MiB with): the budgets are checked without it.
const Race = true
