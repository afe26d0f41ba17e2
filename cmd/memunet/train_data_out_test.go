package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestTrainOutInsideTheDataRefused: train with --out the dataset's folder,
// its images/ or masks/, or a folder inside it (also through a link) is
// refused naming --out and data.path before anything is written: the
// dataset's folders list exactly what they did (no curves.png among the
// images, no lock file), so the set still scans; the same run beside the
// data trains.
func TestTrainOutInsideTheDataRefused(t *testing.T) {
	root := t.TempDir()
	data := filepath.Join(root, "set")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"data", "synth", "--out", data, "--count", "8", "--size", "16", "--classes", "3"}, &stdout, &stderr); code != 0 {
		t.Fatalf("synth: exit %d: %s", code, stderr.String())
	}
	link := filepath.Join(root, "link")
	if err := os.Symlink(data, link); err != nil {
		t.Fatal(err)
	}
	listing := func() []string {
		var names []string
		filepath.WalkDir(data, func(p string, _ os.DirEntry, err error) error {
			names = append(names, p)
			return err
		})
		return names
	}
	before := listing()
	args := func(out string) []string {
		return append([]string{"train", "--config", "../../configs/quickstart.yaml", "--out", out,
			"--set", "data.source=folder", "--set", "data.path=" + data, "--set", "model.classes=3",
			"--set", "data.mask_values=[0,1,2]", "--set", "data.size=16"}, tinyArgs...)
	}
	for _, out := range []string{
		data,
		filepath.Join(data, "images"),
		filepath.Join(data, "masks"),
		filepath.Join(data, "runs", "a"),
		filepath.Join(link, "images"),
	} {
		stdout.Reset()
		stderr.Reset()
		code := run(args(out), &stdout, &stderr)
		if code == 0 || !strings.Contains(stderr.String(), "--out (output.dir) "+out+" is data.path "+data) {
			t.Errorf("train --out %s: exit %d, %q: want a refusal naming --out and data.path", out, code, stderr.String())
		}
		if after := listing(); !slices.Equal(after, before) {
			t.Fatalf("train --out %s wrote into the dataset: %v, was %v", out, after, before)
		}
	}
	stdout.Reset()
	stderr.Reset()
	if code := run(args(filepath.Join(root, "runs", "a")), &stdout, &stderr); code != 0 {
		t.Fatalf("train beside the data: exit %d: %s", code, stderr.String())
	}
}
