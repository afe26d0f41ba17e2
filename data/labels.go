package data

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/memunet/memunet/internal/yamlvalue"
	"go.yaml.in/yaml/v3"
)

// Labels is data.labels: each raw mask value (a gray level, palette index
// or NIfTI label) mapped to a class, several values to one class where
// they merge, or to ignore (LabelIgnore): skipped by the loss and the
// metrics, as VOC's 255 is. Empty: data.mask_values, or the source's own
// mapping. In YAML a mapping, e.g. {0: ignore, 1: 0, 2: 1, 3: 1}.
type Labels map[int]int

// LabelIgnore is the class data.labels writes as ignore.
const LabelIgnore = int(Ignore)

// UnmarshalYAML accepts a mapping of integer values to integer classes or
// "ignore".
func (l *Labels) UnmarshalYAML(n *yaml.Node) error {
	if yamlvalue.IsNull(n) {
		*l = nil
		return nil
	}
	const want = "want a mapping of mask values to classes or ignore, e.g. {0: ignore, 1: 0, 2: 1}"
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("cannot use %s: %s", yamlvalue.Describe(n), want)
	}
	out := Labels{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		raw, err := strconv.Atoi(k.Value) // "0" too: a manifest's JSON holds keys as strings
		if k.Kind != yaml.ScalarNode || err != nil {
			return fmt.Errorf("cannot use %s as a mask value: %s", yamlvalue.Describe(k), want)
		}
		if _, dup := out[raw]; dup {
			return fmt.Errorf("mask value %d is mapped twice; keep one", raw)
		}
		switch c, err := strconv.Atoi(v.Value); {
		case v.Kind == yaml.ScalarNode && v.Value == "ignore":
			out[raw] = LabelIgnore
		case v.Kind == yaml.ScalarNode && v.ShortTag() == "!!int" && err == nil:
			out[raw] = c
		default:
			return fmt.Errorf("cannot map mask value %d to %s: %s", raw, yamlvalue.Describe(v), want)
		}
	}
	*l = nil
	if len(out) > 0 {
		*l = out
	}
	return nil
}

// MarshalYAML writes the mapping in value order, ignore by name.
func (l Labels) MarshalYAML() (any, error) {
	n := &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle}
	for _, raw := range slices.Sorted(maps.Keys(l)) {
		v := strconv.Itoa(l[raw])
		if l[raw] == LabelIgnore {
			v = "ignore"
		}
		n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(raw)},
			&yaml.Node{Kind: yaml.ScalarNode, Value: v})
	}
	return n, nil
}

// validate checks data.labels against the classes: values in range,
// classes in range or ignore, every class reached by some value.
func (l Labels) validate(classes int, maskValues []int) error {
	if len(l) == 0 {
		return nil
	}
	if len(maskValues) > 0 {
		return fmt.Errorf("data.labels and data.mask_values both map mask values to classes; keep data.labels (it can merge and ignore values) and leave data.mask_values out")
	}
	reached := make([]bool, classes)
	for _, raw := range slices.Sorted(maps.Keys(l)) {
		c := l[raw]
		switch {
		case raw < 0 || raw > MaxMaskValue:
			return fmt.Errorf("data.labels: %d: mask values are from 0 to %d", raw, MaxMaskValue)
		case c == LabelIgnore:
		case c < 0 || c >= classes:
			return fmt.Errorf("data.labels: %d: %d: classes are 0..%d (model.classes %d) or ignore", raw, c, classes-1, classes)
		default:
			reached[c] = true
		}
	}
	if k := slices.Index(reached, false); k >= 0 {
		return fmt.Errorf("data.labels: no mask value maps to class %d; map one to it, or lower model.classes", k)
	}
	return nil
}

// describe words the mapping: "0 -> ignore, 1 -> 0, 2 -> 1".
func (l Labels) describe() string {
	var parts []string
	for _, raw := range slices.Sorted(maps.Keys(l)) {
		c := strconv.Itoa(l[raw])
		if l[raw] == LabelIgnore {
			c = "ignore"
		}
		parts = append(parts, fmt.Sprintf("%d -> %s", raw, c))
	}
	return strings.Join(parts, ", ")
}

// Background is data.background: the class that is background (the
// default 0), or NoBackground ("none"), for skip_empty, foreground patches
// and the means without background.
type Background int

// NoBackground is data.background: none.
const NoBackground Background = -1

// UnmarshalYAML accepts a class or none.
func (b *Background) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.Value == "none" {
		*b = NoBackground
		return nil
	}
	c, err := strconv.Atoi(n.Value)
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || err != nil || c < 0 {
		return fmt.Errorf("cannot use %s: want a class (0 by default) or none, e.g. 0", yamlvalue.Describe(n))
	}
	*b = Background(c)
	return nil
}

// MarshalYAML writes a class, or none.
func (b Background) MarshalYAML() (any, error) {
	if b == NoBackground {
		return "none", nil
	}
	return int(b), nil
}

// String is the class, or none.
func (b Background) String() string {
	if b == NoBackground {
		return "none"
	}
	return strconv.Itoa(int(b))
}

// Foreground reports whether class c is foreground: neither the
// background nor Ignore.
func (b Background) Foreground(c uint8) bool { return c != Ignore && int(c) != int(b) }
