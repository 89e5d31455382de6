// Command gen regenerates the embedded schema tables of package schema
// from PVE's API dumps: for each version it reduces
// <shared>/pve-api/<dump> with schema.Reduce and writes
// tables/<version>.json.gz. It runs through go generate in the package
// directory; -shared defaults to ../shared beside the repository root.
package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/corralhq/corral/internal/sim/schema"
)

func main() {
	shared := flag.String("shared", "", "shared directory holding pve-api/ (default: ../shared beside the repository root)")
	out := flag.String("out", "tables", "directory to write <version>.json.gz into")
	flag.Parse()
	if err := run(*shared, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(shared, out string) error {
	if shared == "" {
		root, err := repoRoot()
		if err != nil {
			return err
		}
		shared = filepath.Join(root, "..", "shared")
	}
	for _, version := range schema.Versions {
		src := filepath.Join(shared, "pve-api", schema.SourceFiles[version])
		raw, err := os.ReadFile(src)
		if err != nil {
			return fmt.Errorf("read dump: %w", err)
		}
		table, err := schema.Reduce(raw, version)
		if err != nil {
			return err
		}
		var buf bytes.Buffer
		zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		if err != nil {
			return err
		}
		if _, err := zw.Write(table); err != nil {
			return err
		}
		if err := zw.Close(); err != nil {
			return err
		}
		dst := filepath.Join(out, version+".json.gz")
		if err := os.WriteFile(dst, buf.Bytes(), 0o644); err != nil {
			return fmt.Errorf("write table: %w", err)
		}
		var count struct{ Methods []json.RawMessage }
		if err := json.Unmarshal(table, &count); err != nil {
			return err
		}
		fmt.Printf("%s: %d methods, %d bytes (%d gzipped) from %s\n",
			dst, len(count.Methods), len(table), buf.Len(), src)
	}
	return nil
}

// repoRoot walks up from the working directory to the one holding go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory; pass -shared")
		}
		dir = parent
	}
}
