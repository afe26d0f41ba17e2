package config

import (
	"reflect"
	"strings"
	"testing"

	"github.com/memunet/memunet/internal/yamlvalue"
)

func TestDataKeys(t *testing.T) {
	src := `model:
  classes: 2
  in_channels: 1
data:
  source: folder
  path: /data/carvana
  mask_suffix: _mask
  mask_values: [0, 255]
  class_names: [background, "7"]
  scale: 0.5
  mean: [0.45]
  std: [0.2]
  flip: true
`
	c, err := parse(t, "d.yaml", src, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := c.DataConfig()
	if d.Source != "folder" || d.Path != "/data/carvana" || d.MaskSuffix != "_mask" || !reflect.DeepEqual([]int(d.MaskValues), []int{0, 255}) ||
		d.Scale != 0.5 || d.Mean[0] != 0.45 || d.Std[0] != 0.2 || !c.Data.Flip || d.Channels != 1 || d.Classes != 2 || d.SizeMultiple != 8 {
		t.Errorf("DataConfig: %+v", d)
	}
	if !reflect.DeepEqual(c.Data.ClassNames, yamlvalue.NameList{"background", "7"}) {
		t.Errorf("class names %q", c.Data.ClassNames)
	}
	if h, w := c.ImageSize(); h != 0 || w != 0 {
		t.Errorf("folder without resize in a folder that does not exist: ImageSize %dx%d, want 0x0", h, w)
	}
	// The resolved config reads back the same.
	b, err := c.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := parse(t, "resolved.yaml", string(b), nil)
	if err != nil || !reflect.DeepEqual(back, c) {
		t.Errorf("round trip: %v; %s", err, strings.Join(diff(back, c), "; "))
	}
	// Empty lists are no lists; overrides work.
	c, err = parse(t, "d.yaml", src, []string{"data.mask_values=[]", "data.mean=[]", "data.source=voc", "data.class_names=[]"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Data.MaskValues != nil || c.Data.Mean != nil || c.Data.Source != "voc" || c.Data.ClassNames != nil {
		t.Errorf("after overrides: %+v", c.Data)
	}
	// Synthetic with a scale.
	c, err = parse(t, "s.yaml", "data:\n  size: 64\n  scale: 0.5\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if h, w := c.ImageSize(); h != 32 || w != 32 {
		t.Errorf("synthetic 64 scaled by 0.5: %dx%d", h, w)
	}
}

func TestDataKeyErrors(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		wants     []string
	}{
		{"unknown source", "data:\n  source: coco\n", []string{"data.source", `"coco"`, `"folder"`, `"voc"`}},
		{"folder without path", "data:\n  source: folder\n", []string{"data.path: empty", "images/ and masks/"}},
		{"voc without path", "data:\n  source: voc\n", []string{"data.path: empty", "VOCdevkit"}},
		{"two channels", "model:\n  in_channels: 2\ndata:\n  source: folder\n  path: x\n", []string{"model.in_channels: 2", "gray (1) or RGB (3)"}},
		{"mask values count", "model:\n  classes: 3\ndata:\n  mask_values: [0, 255]\n", []string{"data.mask_values", "model.classes is 3"}},
		{"mask value range", "model:\n  classes: 2\ndata:\n  mask_values: [0, 70000]\n", []string{"data.mask_values: 70000", "0 to 65535"}},
		{"mask values twice", "model:\n  classes: 2\ndata:\n  mask_values: [1, 1]\n", []string{"listed twice"}},
		{"mask value not integer", "model:\n  classes: 2\ndata:\n  mask_values: [0, 1.0]\n", []string{"line 4", "data.mask_values", "want a list of integers"}},
		{"mask values scalar", "data:\n  mask_values: 3\n", []string{"data.mask_values", "want a list of integers"}},
		{"class names count", "model:\n  classes: 3\ndata:\n  class_names: [background, car]\n", []string{"data.class_names: 2 names but model.classes is 3", "one name per class"}},
		{"class name empty", "model:\n  classes: 2\ndata:\n  class_names: [background, \"\"]\n", []string{"data.class_names", "class 1 is empty"}},
		{"class names twice", "model:\n  classes: 2\ndata:\n  class_names: [car, car]\n", []string{"data.class_names", `"car" names classes 0 and 1`}},
		{"class names scalar", "data:\n  class_names: car\n", []string{"data.class_names", "want a list of names"}},
		{"class names nested", "model:\n  classes: 2\ndata:\n  class_names: [[a], b]\n", []string{"data.class_names", "want a list of names"}},
		{"mean length", "data:\n  mean: [0.5, 0.5]\n", []string{"data.mean", "one per channel (3)"}},
		{"std zero", "data:\n  std: [0.2, 0, 0.2]\n", []string{"data.std", "positive"}},
		{"std not numbers", "data:\n  std: [a]\n", []string{"data.std", "want a list of numbers"}},
		{"scale negative", "data:\n  scale: -0.5\n", []string{"data.scale: -0.5"}},
		{"scale and resize", "data:\n  scale: 0.5\n  resize: [16, 16]\n", []string{"data.scale", "data.resize", "only one"}},
		{"scaled size", "data:\n  size: 32\n  scale: 0.6\n", []string{"data.scale: 0.6", "gives 19", "2^model.depth = 8", "data.resize: [16, 16]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, "d.yaml", tc.src, nil)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	// The synthetic-only keys do not constrain a file source.
	if _, err := parse(t, "d.yaml", "data:\n  source: folder\n  path: x\n  size: 30\n  count: 1\n", nil); err != nil {
		t.Errorf("folder with synthetic keys that would be invalid: %v", err)
	}
}

// TestCapacityAuto: memory.capacity: auto reads and writes as auto.
func TestCapacityAuto(t *testing.T) {
	cfg, err := Parse("x.yaml", []byte("memory:\n  capacity: auto\n"), nil)
	if err != nil || cfg.Memory.Capacity != CapacityAuto {
		t.Fatalf("auto: %v, %v", cfg.Memory.Capacity, err)
	}
	out, err := cfg.Marshal()
	if err != nil || !strings.Contains(string(out), "capacity: auto") {
		t.Errorf("marshal: %v\n%s", err, out)
	}
	if _, err := Parse("x.yaml", []byte("memory:\n  capacity: -5\n"), nil); err == nil {
		t.Error("capacity -5 accepted")
	}
}
