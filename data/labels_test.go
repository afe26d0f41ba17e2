package data

import (
	"fmt"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestLabelsParse: data.labels reads a mapping of values to classes or
// ignore (keys as JSON strings too), and writes it back the same.
func TestLabelsParse(t *testing.T) {
	var l Labels
	if err := yaml.Unmarshal([]byte(`{0: ignore, 1: 0, 2: 1, "3": 1}`), &l); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(map[int]int(l)) != "map[0:255 1:0 2:1 3:1]" {
		t.Fatalf("labels %v", l)
	}
	out, err := yaml.Marshal(l)
	if err != nil || strings.TrimSpace(string(out)) != "{0: ignore, 1: 0, 2: 1, 3: 1}" {
		t.Fatalf("marshal: %q %v", out, err)
	}
	for _, bad := range []string{`[0, 1]`, `{a: 0}`, `{0: background}`, `{0: 1.5}`} {
		if err := yaml.Unmarshal([]byte(bad), &l); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
	var b Background
	if err := yaml.Unmarshal([]byte("none"), &b); err != nil || b != NoBackground || b.Foreground(0) != true || b.Foreground(Ignore) {
		t.Errorf("none: %v %v", b, err)
	}
}

// TestLabelsMapAndRefuse: data.labels merges and ignores values in a
// set's mapping, data check counts each class and the ignored voxels,
// and what cannot be is an error naming the key.
func TestLabelsMapAndRefuse(t *testing.T) {
	dir := t.TempDir()
	writeNIfTISet(t, dir, 3, []int{8, 6, 5}) // mask values 0, 1, 2
	cfg := niftiConfig(dir)
	cfg.Classes, cfg.Labels = 2, Labels{0: 0, 1: 1, 2: LabelIgnore}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	rep, err := Check(cfg)
	if err != nil || len(rep.Problems) != 0 {
		t.Fatalf("%v %v", err, rep.Problems)
	}
	var text strings.Builder
	rep.Write(&text)
	for _, want := range []string{"mapping: data.labels maps 0 -> 0, 1 -> 1, 2 -> ignore", "classes (pixels or voxels, share): 0 (background) ", ", ignored "} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, text.String())
		}
	}
	for _, tc := range []struct {
		key  string
		edit func(c *SourceConfig)
	}{
		{"data.labels: 2: 5", func(c *SourceConfig) { c.Labels = Labels{0: 0, 1: 1, 2: 5} }},
		{"data.labels: no mask value maps to class 1", func(c *SourceConfig) { c.Labels = Labels{0: 0, 1: 0} }},
		{"data.labels and data.mask_values", func(c *SourceConfig) { c.MaskValues = []int{0, 1} }},
		{"data.background: 2", func(c *SourceConfig) { c.Background = 2 }},
		{"data.split: slices", func(c *SourceConfig) { c.Split, c.Dims = SplitSlices, 3 }},
		{"data.split: \"blocks\"", func(c *SourceConfig) { c.Split = "blocks" }},
	} {
		c := cfg
		tc.edit(&c)
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), tc.key) {
			t.Errorf("%s: got %v", tc.key, err)
		}
	}
	// A value the labels leave out is a problem naming the fix.
	cfg.Labels = Labels{0: 0, 1: 1}
	rep, _ = Check(cfg)
	if !strings.Contains(fmt.Sprint(rep.Problems), "map it in data.labels") {
		t.Errorf("an unmapped value: %v", rep.Problems)
	}
}
