package config

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/memunet/memunet/configs"
	"github.com/memunet/memunet/infile"
	"github.com/memunet/memunet/internal/yamlvalue"
	"go.yaml.in/yaml/v3"
)

// MaxFileBytes bounds a config file. The presets are under 10 KiB; parsing
// YAML costs about 120 bytes of memory per byte of input, so a file at the
// bound costs ~120 MB, a larger one (a 50 MB list) is refused unread.
const MaxFileBytes = 1 << 20 // 1 MiB, as the error says

// Load reads the YAML file at path over Default, applies the overrides
// ("section.key=value", value in YAML syntax) and validates the result. Every
// error names the file and, where there is one, the line and key. A path
// that names no file but is a built-in config's name (configs.Names:
// quickstart, fp16, ...; with or without .yaml) reads that config, so a
// preset works without a checkout. What is not a regular file (a FIFO, a
// device, a socket) or is larger than MaxFileBytes is refused unread.
func Load(path string, overrides []string) (Config, error) {
	return load(path, overrides, Invocation{})
}

// Load is Load of inv's --config and --set, with inv kept in the result
// (Config.Invocation) and used in the messages' hints.
func (inv Invocation) Load() (Config, error) {
	cfg, err := load(inv.Config, inv.Sets, inv)
	cfg.Invocation = inv
	return cfg, err
}

func load(path string, overrides []string, inv Invocation) (Config, error) {
	name, src, err := read(path, inv)
	if err != nil {
		return Config{}, err
	}
	return Parse(name, src, overrides)
}

// read returns the contents of the config path names and the name to give
// it in messages.
func read(path string, inv Invocation) (name string, src []byte, err error) {
	src, err = infile.ReadFile(path, MaxFileBytes)
	switch {
	case err == nil:
		return path, src, nil
	case errors.Is(err, os.ErrNotExist):
		if preset := strings.TrimSuffix(path, ".yaml"); !strings.ContainsAny(path, `/\`) && slices.Contains(configs.Names(), preset) {
			src, err := configs.Read(preset)
			return preset + " (built-in)", src, err
		}
		return "", nil, fmt.Errorf("config file %s does not exist; %spass an existing file to --config, or a built-in config by name: %s (%s)",
			path, nearConfig(path), strings.Join(configs.Names(), ", "), inv.Run("config list"))
	}
	var refused *infile.Error
	if errors.As(err, &refused) {
		return "", nil, fmt.Errorf("config file %w; --config names a YAML file (at most 1 MiB) or a built-in config (%s)", err, inv.Run("config list"))
	}
	return "", nil, fmt.Errorf("config file %s: %w", path, err)
}

// Parse is Load on the file's contents; name is used in messages.
func Parse(name string, src []byte, overrides []string) (Config, error) {
	cfg := Default()
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(src))
	if err := dec.Decode(&doc); err != nil && err != io.EOF {
		return Config{}, fmt.Errorf("%s: %s%s", name, strings.TrimPrefix(err.Error(), "yaml: "), tabHint(src))
	}
	// A second document (after ---) would otherwise be silently ignored.
	for {
		var extra yaml.Node
		err := dec.Decode(&extra)
		if err == io.EOF {
			break
		}
		if err != nil {
			return Config{}, fmt.Errorf("%s: %s", name, strings.TrimPrefix(err.Error(), "yaml: "))
		}
		if len(extra.Content) > 0 && !yamlvalue.IsNull(extra.Content[0]) {
			return Config{}, fmt.Errorf("%s: line %d: a second YAML document (after ---); put all settings in one document",
				name, extra.Content[0].Line)
		}
	}
	root := &yaml.Node{Kind: yaml.MappingNode}
	if len(doc.Content) > 0 {
		root = doc.Content[0]
	}
	if yamlvalue.IsNull(root) {
		root = &yaml.Node{Kind: yaml.MappingNode}
	}
	byFlag := map[string]bool{} // the keys --set gave
	for _, o := range overrides {
		key, err := applyOverride(root, o)
		if err != nil {
			return Config{}, err
		}
		byFlag[key] = true
	}
	set := map[string]bool{}
	if err := decodeStrict(name, root, reflect.ValueOf(&cfg).Elem(), "", set); err != nil {
		return Config{}, err
	}
	if len(cfg.Data.Resize) == 0 {
		cfg.Data.Resize = nil // "resize: []" and no resize are the same
	}
	if len(cfg.Data.Patch) == 0 {
		cfg.Data.Patch = nil
	}
	for _, l := range []*[]float64{&cfg.Data.Augment.CropScale, &cfg.Data.Augment.Scale, &cfg.Data.Augment.Elastic, &cfg.Data.Augment.Blur,
		&cfg.Data.Augment.BrightnessMul, &cfg.Data.Augment.ContrastRange, &cfg.Data.Augment.Gamma} {
		if len(*l) == 0 {
			*l = nil
		}
	}
	if len(cfg.Train.InitSkip) == 0 {
		cfg.Train.InitSkip = nil
	}
	if len(cfg.Train.Freeze) == 0 {
		cfg.Train.Freeze = nil
	}
	if len(cfg.Model.PoolKernels) == 0 {
		cfg.Model.PoolKernels = nil
	}
	if set["train.epochs"] && !set["train.steps"] {
		cfg.Train.Steps = 0 // asking for epochs replaces the default step budget
	}
	if err := cfg.Validate(); err != nil {
		// A message about a key --set gave names --set, not the file,
		// which may not hold the key at all.
		if key, _, ok := strings.Cut(err.Error(), ":"); ok && byFlag[key] {
			return Config{}, fmt.Errorf("--set %w", err)
		}
		return Config{}, fmt.Errorf("%s: %w", name, err)
	}
	return cfg, nil
}

// decodeStrict decodes node into v, a struct, key by key, so that an unknown
// key or a value of the wrong type is reported with its line and full key.
// The full key of every value decoded is recorded in set.
func decodeStrict(name string, node *yaml.Node, v reflect.Value, prefix string, set map[string]bool) error {
	where := prefix
	if where == "" {
		where = "the top level"
	}
	if yamlvalue.IsNull(node) { // an empty section ("train:" with every key commented out)
		return nil
	}
	if node.Kind != yaml.MappingNode {
		return fmt.Errorf("%s: %s must be a mapping of keys to values (section: then indented key: value lines)", loc(name, node.Line), where)
	}
	fields := map[string]reflect.Value{}
	keyFields(v, fields)
	known := slices.Sorted(maps.Keys(fields))
	seen := map[string]bool{}
	for i := 0; i+1 < len(node.Content); i += 2 {
		k, val := node.Content[i], node.Content[i+1]
		key := joinKey(prefix, k.Value)
		f, ok := fields[k.Value]
		if !ok {
			return fmt.Errorf("%s: unknown key %q in %s; %sknown keys: %s", loc(name, k.Line), key, where,
				keyHint(prefix, k.Value, val, known, k.Line == 0), strings.Join(known, ", "))
		}
		if seen[k.Value] {
			return fmt.Errorf("%s: key %q appears twice; keep only one", loc(name, k.Line), key)
		}
		seen[k.Value] = true
		if isSection(f.Type()) {
			if err := decodeStrict(name, val, f, key, set); err != nil {
				return err
			}
			continue
		}
		if f.Kind() == reflect.Slice {
			f.Set(reflect.Zero(f.Type())) // a list replaces the default, not merges into it
		}
		if isInteger(f.Kind()) && f.Type() != reflect.TypeFor[ByteSize]() && !f.Addr().Type().Implements(reflect.TypeFor[encoding.TextUnmarshaler]()) &&
			val.Kind == yaml.ScalarNode && val.ShortTag() != "!!int" {
			// yaml would truncate 1.5 to 1; a count must be written as an integer
			return fmt.Errorf("%s: %s: %s", loc(name, val.Line), key, typeError(errNotInteger, key, f.Type(), val))
		}
		set[key] = true
		if err := val.Decode(f.Addr().Interface()); err != nil {
			return fmt.Errorf("%s: %s: %s", loc(name, val.Line), key, typeError(err, key, f.Type(), val))
		}
		if f.Kind() == reflect.Float64 && f.Float() == 0 && underflows(val.Value) {
			return fmt.Errorf("%s: %s: %s is too small for a float64 and would be read as 0; write 0, or a number above 1e-300", loc(name, val.Line), key, val.Value)
		}
	}
	return nil
}

// keyFields maps each key of the section v to its field.
func keyFields(v reflect.Value, fields map[string]reflect.Value) {
	for _, k := range sectionKeys(v) {
		fields[k.name] = k.field
	}
}

type sectionKey struct {
	name  string
	field reflect.Value
}

// sectionKeys are the keys of the section v in their order; an inline
// struct's keys (a section another package owns, as model.Arch) are the
// section's own.
func sectionKeys(v reflect.Value) []sectionKey {
	var keys []sectionKey
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")
		switch {
		case tag[0] == "-":
			continue // not a key (Config.Invocation)
		case slices.Contains(tag[1:], "inline"):
			keys = append(keys, sectionKeys(v.Field(i))...)
		default:
			keys = append(keys, sectionKey{tag[0], v.Field(i)})
		}
	}
	return keys
}

// Setting is one key of a config section and its value.
type Setting struct {
	Key   string // "model.base"
	Value any
}

// Sections are the names of the config's top-level keys, in order.
func (c Config) Sections() []string {
	var out []string
	for _, sec := range sectionKeys(reflect.ValueOf(c)) {
		out = append(out, sec.name)
	}
	return out
}

// Settings are the keys of the top-level section name ("model") with their
// values, in the order of the config's sections.
func (c Config) Settings(section string) []Setting {
	var out []Setting
	for _, sec := range sectionKeys(reflect.ValueOf(c)) {
		if sec.name != section || sec.field.Kind() != reflect.Struct {
			continue
		}
		for _, k := range sectionKeys(sec.field) {
			out = append(out, Setting{section + "." + k.name, k.field.Interface()})
		}
	}
	return out
}

var errNotInteger = errors.New("yaml: not an integer")

// underflows reports a number written with a non-zero digit (before any
// exponent) that reads as 0: 1e-400.
func underflows(s string) bool {
	mantissa, _, _ := strings.Cut(strings.ToLower(s), "e")
	return strings.ContainsAny(mantissa, "123456789")
}

func isInteger(k reflect.Kind) bool {
	return k >= reflect.Int && k <= reflect.Uint64
}

// typeError says what key, of type t, wants instead of val, with an
// example of the right shape for that key.
func typeError(err error, key string, t reflect.Type, val *yaml.Node) string {
	var want string
	switch t.Kind() {
	case reflect.Int, reflect.Int64:
		want = "an integer"
		if t == reflect.TypeFor[ByteSize]() {
			want = "a size such as 6GiB"
		}
	case reflect.Uint64:
		want = "a non-negative integer"
	case reflect.Float64:
		want = "a number"
	case reflect.Bool:
		want = "true or false"
	case reflect.String:
		want = "a string"
	case reflect.Slice:
		want = map[reflect.Kind]string{reflect.Int: "a list of integers", reflect.Float64: "a list of numbers", reflect.String: "a list of names", reflect.Array: "a list of [D, H, W] triples"}[t.Elem().Kind()]
	}
	if ex := example(key); ex != "" && t.Kind() != reflect.Bool && !strings.Contains(want, " such as ") {
		want += ", e.g. " + ex
	}
	msg := err.Error()
	if te := (*yaml.TypeError)(nil); errors.As(err, &te) || strings.HasPrefix(msg, "yaml:") {
		return fmt.Sprintf("cannot use %s: want %s", yamlvalue.Describe(val), want)
	}
	return msg
}

// examples are a right value of the keys whose default shows no shape (an
// empty list) or a misleading one.
var examples = map[string]string{
	"data.resize":                 "[64, 64] (height, width)",
	"data.augment.crop_scale":     "[0.5, 1] (min, max share of the area)",
	"data.augment.scale":          "[0.7, 1.4] (lo, hi)",
	"data.augment.elastic":        "[200, 10] (alpha, sigma)",
	"data.augment.blur":           "[0.5, 1] (lo, hi sigma)",
	"data.augment.brightness_mul": "[0.75, 1.25] (lo, hi)",
	"data.augment.contrast_range": "[0.75, 1.25] (lo, hi)",
	"data.augment.gamma":          "[0.7, 1.5] (lo, hi)",
	"data.mask_values":            "[0, 255]",
	"data.nifti.window":           "[-1000, 400] (lo, hi)",
	"data.patch":                  "[128, 128] (height, width)",
	"train.init_skip":             "[outc]",
	"model.pool_kernels":          "[[1, 2, 2], [2, 2, 2]] (one per level)",
	"train.freeze":                "[encoder]",
	"train.betas":                 "[0.9, 0.999] (beta1, beta2)",
}

// example is a right value for key: examples' or the default's, in YAML's
// flow style ("" when the default is empty).
func example(key string) string {
	if ex, ok := examples[key]; ok {
		return ex
	}
	v := reflect.ValueOf(Default())
	for _, k := range strings.Split(key, ".") {
		if v.Kind() != reflect.Struct {
			return ""
		}
		fields := map[string]reflect.Value{}
		keyFields(v, fields)
		f, found := fields[k]
		if !found {
			return ""
		}
		v = f
	}
	if v.IsZero() && !isInteger(v.Kind()) && v.Kind() != reflect.Float64 {
		return ""
	}
	var n yaml.Node
	if err := n.Encode(v.Interface()); err != nil {
		return ""
	}
	n.Style = yaml.FlowStyle
	b, err := yaml.Marshal(&n)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// tabHint explains the usual cause of a syntax error: a tab in the indentation.
func tabHint(src []byte) string {
	for i, l := range strings.Split(string(src), "\n") {
		if ind := l[:len(l)-len(strings.TrimLeft(l, " \t"))]; strings.Contains(ind, "\t") {
			return fmt.Sprintf(" (line %d is indented with a tab; YAML indentation must use spaces)", i+1)
		}
	}
	return ""
}

func joinKey(prefix, k string) string {
	if prefix == "" {
		return k
	}
	return prefix + "." + k
}

// applyOverride sets "section.key=value" in the node tree, creating the
// section or key if the file does not have it; key is the section.key it
// set.
func applyOverride(root *yaml.Node, o string) (key string, err error) {
	path, value, ok := strings.Cut(o, "=")
	if !ok || path == "" {
		return "", fmt.Errorf("--set %q: write section.key=value, e.g. --set train.steps=100", o)
	}
	if strings.TrimSpace(value) == "" {
		return "", fmt.Errorf("--set %s=: the value is empty; write one (\"\" for an empty string, [] for an empty list)", path)
	}
	var vdoc yaml.Node
	if err := yaml.Unmarshal([]byte(value), &vdoc); err != nil {
		return "", fmt.Errorf("--set %s: the value %q is not valid YAML: %v", path, value, err)
	}
	vnode := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: ""}
	if len(vdoc.Content) > 0 {
		vnode = vdoc.Content[0]
	}
	clearLines(vnode) // line 0 marks a value that came from --set
	keys := strings.Split(path, ".")
	n := root
	for i, k := range keys {
		if yamlvalue.IsNull(n) && i > 0 { // an empty section in the file
			*n = yaml.Node{Kind: yaml.MappingNode, Line: n.Line, Column: n.Column}
		}
		if n.Kind != yaml.MappingNode {
			if i == 0 {
				return "", fmt.Errorf("--set %s: the file's top level is not a mapping of sections", path)
			}
			return "", fmt.Errorf("--set %s: %s is not a section; write section.key=value", path, strings.Join(keys[:i], "."))
		}
		var next *yaml.Node
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == k {
				next = n.Content[j+1]
				if i == len(keys)-1 {
					n.Content[j+1] = vnode
				}
			}
		}
		if next == nil {
			next = &yaml.Node{Kind: yaml.MappingNode}
			if i == len(keys)-1 {
				next = vnode
			}
			n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k}, next)
		}
		n = next
	}
	return path, nil
}

func clearLines(n *yaml.Node) {
	n.Line = 0
	for _, c := range n.Content {
		clearLines(c)
	}
}

// loc names where a value came from: a line of the file, or --set.
func loc(name string, line int) string {
	if line == 0 {
		return name + ": --set"
	}
	return fmt.Sprintf("%s: line %d", name, line)
}
