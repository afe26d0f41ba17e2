// Package yamlvalue decodes the config's lists strictly, where an empty
// list is no list ("key: []" decodes to nil, as leaving the key out does),
// and words the node a value came from for errors. The config's sections
// (package config's own, data.Config) share them, so that a list key reads
// the same in every section. Values only: nothing here keeps state.
package yamlvalue

import (
	"fmt"

	"go.yaml.in/yaml/v3"
)

// IntList is a list of integers.
type IntList []int

// UnmarshalYAML accepts a list of integers (not 1.0).
func (l *IntList) UnmarshalYAML(n *yaml.Node) error {
	if IsNull(n) {
		*l = nil
		return nil
	}
	var v []int
	ok := n.Kind == yaml.SequenceNode
	for _, e := range n.Content {
		ok = ok && e.Kind == yaml.ScalarNode && e.ShortTag() == "!!int"
	}
	if !ok || n.Decode(&v) != nil {
		return fmt.Errorf("cannot use %s: want a list of integers, e.g. [0, 255]", Describe(n))
	}
	*l = nil
	if len(v) > 0 {
		*l = v
	}
	return nil
}

// NameList is a list of names.
type NameList []string

// UnmarshalYAML accepts a list of scalars, each taken as written.
func (l *NameList) UnmarshalYAML(n *yaml.Node) error {
	if IsNull(n) {
		*l = nil
		return nil
	}
	ok := n.Kind == yaml.SequenceNode
	var v []string
	for _, e := range n.Content {
		ok = ok && e.Kind == yaml.ScalarNode
		v = append(v, e.Value)
	}
	if !ok {
		return fmt.Errorf("cannot use %s: want a list of names, e.g. [background, car]", Describe(n))
	}
	*l = nil
	if len(v) > 0 {
		*l = v
	}
	return nil
}

// FloatList is a list of numbers.
type FloatList []float64

// UnmarshalYAML accepts a list of numbers.
func (l *FloatList) UnmarshalYAML(n *yaml.Node) error {
	if IsNull(n) {
		*l = nil
		return nil
	}
	var v []float64
	if n.Kind != yaml.SequenceNode || n.Decode(&v) != nil {
		return fmt.Errorf("cannot use %s: want a list of numbers, e.g. [0.485, 0.456, 0.406]", Describe(n))
	}
	*l = nil
	if len(v) > 0 {
		*l = v
	}
	return nil
}

// Describe words a node for an error: a scalar quoted as written, else
// what kind of node it is.
func Describe(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return fmt.Sprintf("%q", n.Value)
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "the alias *" + n.Value
	}
	return "this value"
}

// IsNull reports whether n is an empty or null scalar (key: with no value).
func IsNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }
