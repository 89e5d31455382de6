package vmrun

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Seed is the NoCloud seed's three files as PVE writes them (the
// emulator's model renders them: model.VMCloudInit's UserData,
// NetworkConfig and MetaData).
type Seed struct {
	UserData, NetworkConfig, MetaData string
}

// WriteSeed writes seed as a NoCloud seed: an ISO 9660 image with
// volume id cidata holding user-data, meta-data and network-config.
func WriteSeed(ctx context.Context, seed Seed, iso string) error {
	dir, err := os.MkdirTemp(filepath.Dir(iso), ".seed-")
	if err != nil {
		return fmt.Errorf("cloud-init drive: %w", err)
	}
	defer os.RemoveAll(dir)
	files := map[string]string{
		"user-data":      seed.UserData,
		"network-config": seed.NetworkConfig,
		"meta-data":      seed.MetaData,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			return fmt.Errorf("cloud-init drive: %w", err)
		}
	}
	tool, err := exec.LookPath("genisoimage")
	if err != nil {
		if tool, err = exec.LookPath("xorrisofs"); err != nil {
			return fmt.Errorf("cloud-init drive: genisoimage not found: install Debian's genisoimage (apt-get install genisoimage), as root")
		}
	}
	out, err := exec.CommandContext(ctx, tool, "-quiet", "-output", iso, "-volid", "cidata", "-joliet", "-rock", dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("cloud-init drive: %s: %w: %s", filepath.Base(tool), err, out)
	}
	return nil
}
