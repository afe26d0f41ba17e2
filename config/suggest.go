package config

import (
	"encoding"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"github.com/memunet/memunet/configs"
	"github.com/memunet/memunet/internal/suggest"
	"go.yaml.in/yaml/v3"
)

// configKey is one key of the config in full ("train.batch_size"), and
// whether it takes true or false.
type configKey struct {
	full string
	bool bool
}

// Keys are every key of the config in full ("train.batch_size"), in the
// order of the sections; a section's own sections are opened
// ("data.augment.flip"), not listed.
func Keys() []string {
	var out []string
	for _, k := range allKeys() {
		out = append(out, k.full)
	}
	return out
}

func allKeys() []configKey { return leafKeys(reflect.ValueOf(Default()), "") }

func leafKeys(v reflect.Value, prefix string) []configKey {
	var out []configKey
	for _, k := range sectionKeys(v) {
		key := joinKey(prefix, k.name)
		if isSection(k.field.Type()) {
			out = append(out, leafKeys(k.field, key)...)
			continue
		}
		out = append(out, configKey{key, k.field.Kind() == reflect.Bool})
	}
	return out
}

// isSection reports whether a field of type t is a section of keys, rather
// than a value (a struct that decodes itself is a value).
func isSection(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	return t.Kind() == reflect.Struct && !p.Implements(reflect.TypeFor[yaml.Unmarshaler]()) &&
		!p.Implements(reflect.TypeFor[encoding.TextUnmarshaler]())
}

func lastPart(key string) string { return key[strings.LastIndex(key, ".")+1:] }

// keysNamed are the keys whose last part is name (compared without case,
// '-' read as '_'): "steps" is train.steps.
func keysNamed(name string) []configKey {
	var out []configKey
	for _, k := range allKeys() {
		if suggest.Fold(lastPart(k.full)) == suggest.Fold(name) {
			out = append(out, k)
		}
	}
	return out
}

// keysNear are the keys whose last part is the one nearest name, if one is
// near: "step" is train.steps.
func keysNear(name string) []configKey {
	var parts []string
	for _, k := range allKeys() {
		if p := lastPart(k.full); !slices.Contains(parts, p) {
			parts = append(parts, p)
		}
	}
	if near := suggest.Nearest(name, parts); near != "" {
		return keysNamed(near)
	}
	return nil
}

// setForms are the --set flags that set keys to value, as one may paste
// them: "--set train.steps=100 or --set ...". An empty value reads true
// for a key that takes true or false, else VALUE.
func setForms(keys []configKey, value string) string {
	var forms []string
	for _, k := range keys {
		v := value
		if v == "" {
			v = "VALUE"
			if k.bool {
				v = "true"
			}
		}
		forms = append(forms, "--set "+Quote(k.full+"="+v))
	}
	return strings.Join(forms, " or ")
}

// FlagProblem is what to say of err, fs.Parse's error on args: for a flag
// fs does not define, "unknown flag --NAME" with a "did you mean" where one
// is near. A flag named as a config key's last part, on a command that
// takes --set, is that --set with the value that followed it ("--steps
// 100": "did you mean --set train.steps=100?"); else it is the command's
// flag nearest it ("--chekpoint": "did you mean --checkpoint?"), else the
// --set of the config key nearest it.
func FlagProblem(fs *flag.FlagSet, args []string, err error) string {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok || name == "" {
		return err.Error()
	}
	msg := "unknown flag --" + name
	var flags []string
	fs.VisitAll(func(f *flag.Flag) { flags = append(flags, f.Name) })
	takesSet := slices.Contains(flags, "set")
	value := flagValue(args, name)
	if keys := keysNamed(name); takesSet && len(keys) > 0 {
		return msg + "; did you mean " + setForms(keys, value) + "?"
	}
	if near := suggest.Nearest(name, flags); near != "" {
		return msg + "; did you mean --" + near + "?"
	}
	if keys := keysNear(name); takesSet && len(keys) > 0 {
		return msg + "; did you mean " + setForms(keys, value) + "?"
	}
	return msg
}

// flagValue is the value given to the flag name in args: after its '=', or
// the next argument unless that is a flag ("" if none).
func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == "--" {
			break
		}
		arg := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if arg == a {
			continue // not a flag
		}
		if v, ok := strings.CutPrefix(arg, name+"="); ok {
			return v
		}
		if arg == name {
			if i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				return args[i+1]
			}
			return ""
		}
	}
	return ""
}

// keyHint is the "did you mean" of the unknown key k (with value val) in
// the section prefix ("" for the top level) whose keys are known, with a
// trailing space, or "": the key of the section nearest it
// ("train.batchsize": train.batch_size), else a key of that name in
// another section ("steps" at the top level: train.steps), else the key
// nearest it anywhere. From --set (fromSet), the hint is the --set to
// paste, with val's value.
func keyHint(prefix, k string, val *yaml.Node, known []string, fromSet bool) string {
	// A --set of a mistyped section ("trian.steps=1") reaches here as the
	// section "trian" holding steps: 1; the hint keeps the rest.
	rest, leaf := "", val
	for fromSet && leaf.Kind == yaml.MappingNode && len(leaf.Content) == 2 {
		rest += "." + leaf.Content[0].Value
		leaf = leaf.Content[1]
	}
	var keys []configKey
	if near := suggest.Nearest(k, known); near != "" {
		keys = []configKey{{full: joinKey(prefix, near) + rest}}
		if leaf.Kind == yaml.MappingNode { // a section given more than one key
			fromSet = false
		}
	} else if keys = keysNamed(k); len(keys) == 0 {
		keys = keysNear(k)
	}
	if len(keys) == 0 {
		return ""
	}
	if fromSet {
		return "did you mean " + setForms(keys, nodeValue(leaf)) + "? "
	}
	var full []string
	for _, key := range keys {
		full = append(full, key.full)
	}
	return "did you mean " + strings.Join(full, " or ") + "? "
}

// nodeValue is n written as a --set value: a scalar as it is, a list or a
// mapping in YAML's flow style.
func nodeValue(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return n.Value
	}
	c := *n
	c.Style = yaml.FlowStyle
	b, err := yaml.Marshal(&c)
	if err != nil {
		return "VALUE"
	}
	return strings.TrimSpace(string(b))
}

// nearConfig is "did you mean X? " for the config path nearest the
// missing path: a YAML file beside it (configs/quikstart.yaml:
// configs/quickstart.yaml), or for a bare name a built-in config's
// (quikstart: quickstart); "" if none is near.
func nearConfig(path string) string {
	dir, base := filepath.Split(path)
	var names []string
	if dir == "" { // a built-in config, by name or as name.yaml
		for _, n := range configs.Names() {
			names = append(names, n, n+".yaml")
		}
	}
	if ents, err := os.ReadDir(filepath.Clean(dir + ".")); err == nil {
		for _, e := range ents {
			if ext := filepath.Ext(e.Name()); !e.IsDir() && (ext == ".yaml" || ext == ".yml") {
				names = append(names, e.Name())
			}
		}
	}
	if near := suggest.Nearest(base, names); near != "" && near != base {
		return "did you mean " + dir + near + "? "
	}
	return ""
}

// DidYouMean is "did you mean NAME? " where one of names is near word
// (a mistyped command or value), else "".
func DidYouMean(word string, names []string) string {
	if n := suggest.Nearest(word, names); n != "" && n != word {
		return "did you mean " + n + "? "
	}
	return ""
}
