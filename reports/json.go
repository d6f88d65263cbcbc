package reports

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/locktest/locktest/checker"
)

// WriteResultsJSON writes r to path as indented JSON. It writes a temporary
// file in the same directory and renames it over path, so a reader never
// sees a half-written results.json. Empty lists are written as [] rather
// than null.
func WriteResultsJSON(path string, r *checker.Result) (err error) {
	if r == nil {
		return errors.New("write results: no result")
	}
	out := *r
	if out.Nemeses == nil {
		out.Nemeses = []string{}
	}
	if out.Properties == nil {
		out.Properties = []checker.Property{}
	}
	if out.Anomalies == nil {
		out.Anomalies = []checker.Anomaly{}
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return fmt.Errorf("encode results: %w", err)
	}
	b = append(b, '\n')
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	if _, err = f.Write(b); err != nil {
		_ = f.Close()
		return fmt.Errorf("write results: %w", err)
	}
	if err = f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("write results: %w", err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	if err = os.Chmod(tmp, 0o644); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return nil
}

// ReadResultsJSON reads a results.json that WriteResultsJSON wrote.
func ReadResultsJSON(path string) (*checker.Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r checker.Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}
