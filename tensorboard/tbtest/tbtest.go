// Package tbtest reads TensorBoard event files in tests with an
// independent reader: read_events.py, Python with its own CRC32C and
// protobuf wire-format decoder, sharing no code with package tensorboard.
package tbtest

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

//go:embed read_events.py
var reader []byte

// Events is what read_events.py prints of a folder: its event files in
// name order, each with its events.
type Events struct {
	Files []struct {
		Name   string  `json:"name"`
		Events []Event `json:"events"`
	} `json:"files"`
}

// Event is one record.
type Event struct {
	WallTime    float64 `json:"wall_time"`
	Step        int64   `json:"step"`
	FileVersion string  `json:"file_version"`
	SessionLog  *struct {
		Status int    `json:"status"`
		Msg    string `json:"msg"`
	} `json:"session_log"`
	Values []struct {
		Tag         string   `json:"tag"`
		SimpleValue *float64 `json:"simple_value"`
		Image       *struct {
			Height, Width, Colorspace int
			PNGBytes                  int `json:"png_bytes"`
		} `json:"image"`
	} `json:"values"`
}

// Read reads every event file in dir with read_events.py, failing the test
// where a record's CRC does not verify or a record is cut short, and
// skipping it where there is no python3.
func Read(t testing.TB, dir string) Events {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 to read the event files with")
	}
	script := filepath.Join(t.TempDir(), "read_events.py")
	if err := os.WriteFile(script, reader, 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(py, script, dir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("read_events.py %s: %v: %s", dir, err, stderr.String())
	}
	var ev Events
	if err := json.Unmarshal(out, &ev); err != nil {
		t.Fatalf("read_events.py: %v: %s", err, out)
	}
	return ev
}
