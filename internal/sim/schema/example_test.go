package schema_test

import (
	"errors"
	"fmt"

	"github.com/corralhq/corral/internal/sim/schema"
)

// A request is looked up, its path parameters merged into its parameters,
// and validated; the errors are what PVE sends in its 400 reply.
func ExampleMethod_Validate() {
	api, err := schema.Load("9.1")
	if err != nil {
		panic(err)
	}
	m, params, ok := api.Lookup("PUT", "/nodes/pve/lxc/101/config")
	if !ok {
		panic("no such method")
	}
	params["mp0"] = "local-lvm:8"
	params["onboot"] = "1"
	var pe *schema.ParamError
	if errors.As(m.Validate(params), &pe) {
		fmt.Print(schema.ParamErrorMessage)
		fmt.Printf("%q\n", pe.Errors["mp0"])
	}
	// Output:
	// Parameter verification failed.
	// "invalid format - format error\nmp0.mp: property is missing and it is not optional\n"
}

// A mount point is parsed and printed back in PVE's normalized order.
func ExamplePrintProperty() {
	api, _ := schema.Load("9.1")
	m, _, _ := api.Lookup("PUT", "/nodes/pve/lxc/101/config")
	mp := m.Param("mp3")
	kv, err := mp.ParseProperty("size=8192M,backup=yes,mp=/data,local-lvm:vm-101-disk-1")
	if err != nil {
		panic(err)
	}
	fmt.Println(schema.PrintProperty(mp.PropertyFormat, kv))
	// Output: local-lvm:vm-101-disk-1,mp=/data,backup=1,size=8G
}
