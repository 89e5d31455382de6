// Package schema owns the emulator's knowledge of the Proxmox VE API
// schema: which paths and methods exist, their parameters, permissions and
// return shapes, and the parameter validation PVE runs before any handler.
//
// The facts come from PVE's own API dump (../shared/pve-api/apidoc.json for
// PVE 9.1, apidoc-pve8.json for PVE 8.4). The generator in ./gen reduces
// each dump to a compact table (tables/<version>.json.gz) that is embedded
// here; Load decodes it. Descriptions and other prose are left out.
//
// Validation reproduces pve-common's src/PVE/JSONSchema.pm (check_prop,
// check_type, check_object, check_format, parse_property_string) and the
// registered format verifiers of pve-common, pve-container, pve-storage,
// pve-access-control, qemu-server and pve-network, message for message:
// the strings in a *ParamError are the bytes PVE puts into the "errors"
// object of its 400 reply (behaviour.md §0, fixtures/error-400-param.json).
package schema
