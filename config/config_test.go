package config

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/memunet/memunet/backend"
	"github.com/memunet/memunet/data"
	"github.com/memunet/memunet/device"
	"github.com/memunet/memunet/model"
	"go.yaml.in/yaml/v3"
)

const quickstartPath = "../configs/quickstart.yaml"

// parse is Parse that turns a panic into a test failure.
func parse(t *testing.T, name, src string, overrides []string) (c Config, err error) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("Parse(%q, %q, %q) panicked: %v", name, src, overrides, r)
		}
	}()
	return Parse(name, []byte(src), overrides)
}

func readQuickstart(t testing.TB) []byte {
	t.Helper()
	src, err := os.ReadFile(quickstartPath)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// diff lists the fields (as section.key) where a and b differ.
func diff(a, b Config) []string {
	var out []string
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	for i := 0; i < va.NumField(); i++ {
		sec := va.Type().Field(i)
		if sec.Tag.Get("yaml") == "-" {
			continue
		}
		for j := 0; j < va.Field(i).NumField(); j++ {
			fa, fb := va.Field(i).Field(j), vb.Field(i).Field(j)
			if !reflect.DeepEqual(fa.Interface(), fb.Interface()) {
				out = append(out, sec.Tag.Get("yaml")+"."+sec.Type.Field(j).Tag.Get("yaml")+
					": "+fmtValue(fa)+" != "+fmtValue(fb))
			}
		}
	}
	return out
}

func fmtValue(v reflect.Value) string {
	b, _ := yaml.Marshal(v.Interface())
	return strings.TrimSpace(string(b))
}

func wantDefault(t *testing.T, got Config) {
	t.Helper()
	if !reflect.DeepEqual(got, Default()) {
		t.Errorf("config differs from Default(): %s", strings.Join(diff(got, Default()), "; "))
	}
}

func TestQuickstartIsDefault(t *testing.T) {
	got, err := Load(quickstartPath, nil)
	if err != nil {
		t.Fatalf("Load(%s): %v", quickstartPath, err)
	}
	wantDefault(t, got)

	// The file documents every key: each field of Config appears in it.
	var doc yaml.Node
	if err := yaml.Unmarshal(readQuickstart(t), &doc); err != nil {
		t.Fatal(err)
	}
	present := map[string]bool{}
	root := doc.Content[0]
	for i := 0; i+1 < len(root.Content); i += 2 {
		sec := root.Content[i+1]
		present[root.Content[i].Value] = true
		for j := 0; j+1 < len(sec.Content); j += 2 {
			present[root.Content[i].Value+"."+sec.Content[j].Value] = true
		}
	}
	ct := reflect.TypeFor[Config]()
	for i := 0; i < ct.NumField(); i++ {
		st := ct.Field(i).Type
		if ct.Field(i).Tag.Get("yaml") == "-" {
			continue // Invocation: not a key
		}
		if st == reflect.TypeFor[device.Spec]() { // a top-level key, not a section
			if key := ct.Field(i).Tag.Get("yaml"); !present[key] {
				t.Errorf("%s does not document %s", quickstartPath, key)
			}
			continue
		}
		fields := map[string]reflect.Value{}
		keyFields(reflect.New(st).Elem(), fields)
		for name := range fields {
			key := ct.Field(i).Tag.Get("yaml") + "." + name
			if !present[key] {
				t.Errorf("%s does not document %s", quickstartPath, key)
			}
		}
	}
}

func TestDefaultIsValid(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatal(err)
	}
	// Default returns a fresh value: changing one's list does not change the next.
	d := Default()
	d.Train.Betas[0] = 0.5
	if Default().Train.Betas[0] != 0.9 {
		t.Fatal("Default shares its Betas slice between calls")
	}
}

func TestEmptyGivesDefault(t *testing.T) {
	for _, tc := range []struct{ name, src string }{
		{"empty", ""},
		{"blank lines", "\n\n  \n"},
		{"only comments", "# nothing here\n\n   # still nothing\n"},
		{"document marker", "---\n# comment\n"},
		{"explicit null", "~\n"},
		{"empty section", "train:\n"},
		{"section with keys commented out", "model:\n  # base: 16\ntrain:\n  # steps: 10\n"},
		{"trailing empty document", "model:\n  base: 8\n---\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parse(t, "empty.yaml", tc.src, nil)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			wantDefault(t, got)
		})
	}
}

func TestLoadErrors(t *testing.T) {
	t.Run("missing file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "nope.yaml")
		_, err := Load(path, nil)
		if err == nil {
			t.Fatal("Load of a missing file succeeded")
		}
		for _, w := range []string{path, "does not exist", "--config"} {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not contain %q", err, w)
			}
		}
	})
	t.Run("directory", func(t *testing.T) {
		dir := t.TempDir()
		if _, err := Load(dir, nil); err == nil || !strings.Contains(err.Error(), dir) {
			t.Errorf("Load(directory) = %v, want an error naming %s", err, dir)
		}
	})
	t.Run("error names the path", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "run.yaml")
		if err := os.WriteFile(path, []byte("train:\n  stpes: 5\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path, nil)
		if err == nil || !strings.Contains(err.Error(), path+": line 2") || !strings.Contains(err.Error(), "train.stpes") {
			t.Errorf("Load = %v, want an error naming %s, line 2 and train.stpes", err, path)
		}
	})
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  string
		want []string // besides the file name, which every error must contain
	}{
		{"unknown section", "model:\n  base: 8\nmodle:\n  base: 8\n",
			[]string{"line 3", `"modle"`, "top level", "known keys: cuda, data, device, dist, memory, model, output, predict, train"}},
		{"unknown key in section", "train:\n  steps: 10\n  batchsize: 4\n",
			[]string{"line 3", `"train.batchsize"`, "known keys:", "batch_size", "val_every"}},
		{"batch_size string", "train:\n  batch_size: \"abc\"\n",
			[]string{"line 2", "train.batch_size", `"abc"`, "want an integer"}},
		{"batch_size plain string", "train:\n  batch_size: abc\n",
			[]string{"line 2", "train.batch_size", `"abc"`, "want an integer"}},
		{"batch_size float", "train:\n  batch_size: [8]\n",
			[]string{"line 2", "train.batch_size", "a list", "want an integer"}},
		{"betas scalar", "train:\n  betas: 3\n",
			[]string{"line 2", "train.betas", `"3"`, "want a list", "[0.9, 0.999]"}},
		{"betas bad element", "train:\n  betas: [0.9, x]\n",
			[]string{"line 2", "train.betas", "list of numbers"}},
		{"betas length", "train:\n  betas: [0.9, 0.99, 0.999]\n",
			[]string{"train.betas", "two numbers", "[0.9, 0.999]"}},
		{"capacity word", "memory:\n  capacity: \"lots\"\n",
			[]string{"line 2", "memory.capacity", `"lots"`, "6GiB"}},
		{"capacity mapping", "memory:\n  capacity: {a: 1}\n",
			[]string{"line 2", "memory.capacity", "6GiB"}},
		{"capacity negative", "memory:\n  capacity: -1GiB\n",
			[]string{"line 2", "memory.capacity", "-1GiB", "6GiB"}},
		{"timeline not bool", "memory:\n  timeline: maybe\n",
			[]string{"line 2", "memory.timeline", "true or false"}},
		{"seed negative", "model:\n  seed: -1\n",
			[]string{"line 2", "model.seed", "non-negative integer"}},
		{"lr not a number", "train:\n  lr: fast\n",
			[]string{"line 2", "train.lr", `"fast"`, "want a number"}},
		{"section not a mapping", "train: 5\n",
			[]string{"line 1", "train", "must be a mapping"}},
		{"top level not a mapping", "- a\n- b\n",
			[]string{"line 1", "top level", "must be a mapping"}},
		{"negative batch size", "train:\n  batch_size: -1\n",
			[]string{"train.batch_size", "-1", "at least 1"}},
		{"size not divisible", "model:\n  depth: 3\ndata:\n  size: 30\n",
			[]string{"data.size", "30", "not divisible", "2^model.depth = 8", "multiple of 8", "32"}},
		{"size smaller than 2^depth", "model:\n  depth: 4\ndata:\n  size: 8\n",
			[]string{"data.size", "8", "not divisible", "multiple of 16", "16"}},
		{"duplicated key", "train:\n  steps: 10\n  steps: 20\n",
			[]string{"line 3", `"train.steps"`, "twice", "keep only one"}},
		{"duplicated section", "train:\n  steps: 10\nmodel:\n  base: 8\ntrain:\n  lr: 0.1\n",
			[]string{"line 5", `"train"`, "twice"}},
		{"steps and epochs both 0", "train:\n  steps: 0\n  epochs: 0\n",
			[]string{"train.steps", "train.epochs", "both 0", "set one"}},
		{"steps and epochs both set", "train:\n  steps: 10\n  epochs: 2\n",
			[]string{"train.steps", "train.epochs", "both set", "only one"}},
		{"bad precision", "train:\n  precision: fp8\n", []string{"train.precision", `"fp8"`, "fp32, fp16 or bf16"}},
		{"synthetic size below the generator's", "model:\n  depth: 1\ndata:\n  size: 8\n", []string{"data.size: 8", "between 16 and 4096"}},
		{"bad empty_cache", "memory:\n  empty_cache: sometimes\n", []string{"memory.empty_cache", "never, step or oom"}},
		{"accumulate zero", "train:\n  accumulate: 0\n", []string{"train.accumulate", "at least 1"}},
		{"checkpoint level too deep", "model:\n  depth: 3\n  checkpoint: [0, 4]\n", []string{"model.checkpoint", "level 4", "model.depth = 3"}},
		{"checkpoint word", "model:\n  checkpoint: some\n", []string{"line 2", "model.checkpoint", "none, all, auto, or a list"}},
		{"checkpoint twice", "model:\n  checkpoint: [1, 1]\n", []string{"model.checkpoint", "listed twice"}},
		{"resize not divisible", "data:\n  resize: [30, 32]\n", []string{"data.resize", "not divisible by 2^model.depth = 8", "[32, 32]"}},
		{"resize one number", "data:\n  resize: [32]\n", []string{"data.resize", "[H, W]"}},
		{"scaler enabled word", "train:\n  scaler:\n    enabled: maybe\n", []string{"line 3", "train.scaler.enabled", "auto, true or false"}},
		{"scaler backoff", "train:\n  scaler:\n    backoff_factor: 2\n", []string{"train.scaler.backoff_factor", "between 0 and 1"}},
		{"scaler growth", "train:\n  scaler:\n    growth_factor: 1\n", []string{"train.scaler.growth_factor", "greater than 1"}},
		{"empty cache", "memory:\n  empty_cache: always\n", []string{"memory.empty_cache", "never, step or oom"}},
		{"fit word", "memory:\n  fit: yes\n", []string{"memory.fit", "off or auto"}},
		{"fit without capacity", "memory:\n  fit: auto\n", []string{"memory.fit", "needs memory.capacity"}},
		{"epochs and steps both set", "train:\n  epochs: 2\n  steps: 10\n",
			[]string{"train.steps (10)", "train.epochs (2)", "both set"}},
		{"fractional count", "train:\n  batch_size: 1.5\n",
			[]string{"line 2", "train.batch_size", `"1.5"`, "want an integer"}},
		{"negative steps", "train:\n  steps: -5\n",
			[]string{"train.steps", "-5", "0 (use train.epochs) or more"}},
		{"tab indentation", "train:\n\tsteps: 10\n",
			[]string{"line 2", "indented with a tab", "spaces"}},
		{"unclosed bracket", "train:\n  betas: [0.9, 0.999\n  lr: 0.1\n",
			[]string{"line"}},
		{"unclosed quote", "output:\n  dir: \"runs\n",
			[]string{"line"}},
		{"up nearest", "model:\n  up: nearest\n",
			[]string{"model.up", `"nearest"`, `"bilinear"`, `"transpose"`}},
		{"norm bad", "model:\n  norm: layer\n",
			[]string{"model.norm", `"layer"`, `"batch"`, `"group"`, `"none"`}},
		{"conv_algo bad", "model:\n  conv_algo: fft\n",
			[]string{"model.conv_algo", `"fft"`, `"direct"`, `"winograd"`, `"auto"`}},
		{"groups not dividing", "model:\n  norm: group\n  groups: 3\n",
			[]string{"model.groups", "3", "power of two"}},
		{"depth too large", "model:\n  depth: 9\n",
			[]string{"model.depth", "9", "between 1 and 8"}},
		{"progress bad", "output:\n  progress: fancy\n",
			[]string{"output.progress", `"fancy"`, "auto, bar, plain or none"}},
		{"log_every zero", "output:\n  log_every: 0\n",
			[]string{"output.log_every", "at least 1"}},
		{"val_fraction leaves no validation", "data:\n  count: 4\n  val_fraction: 0.1\n",
			[]string{"data.val_fraction", "0.1", "data.count 4", "0 validation", "at least 1"}},
		{"val_fraction out of range", "data:\n  val_fraction: 1\n",
			[]string{"data.val_fraction", "between 0 and 1"}},
		{"classes too many for synthetic", "model:\n  classes: 5\n",
			[]string{"model.classes", "5", "at most 4"}},
		{"source unknown", "data:\n  source: imagenet\n",
			[]string{"data.source", `"imagenet"`, `"synthetic"`}},
		{"noise NaN", "data:\n  noise: .nan\n",
			[]string{"data.noise", "NaN", "between 0 and 1"}},
		{"lr infinite", "train:\n  lr: .inf\n",
			[]string{"train.lr", "+Inf", "finite"}},
		{"eps infinite", "train:\n  eps: .inf\n",
			[]string{"train.eps", "+Inf", "finite"}},
		{"weight_decay infinite", "train:\n  weight_decay: .inf\n",
			[]string{"train.weight_decay", "+Inf", "finite"}},
		{"huge base with group norm", "model:\n  norm: group\n  base: 2305843009213693952\n",
			[]string{"model.base", "2305843009213693952", "between 1 and 65536"}},
		{"second document", "train:\n  steps: 10\n---\ntrain:\n  steps: 20\n",
			[]string{"line 4", "second YAML document", "one document"}},
		{"bad second document", "train:\n  steps: 10\n---\ntrain: [\n",
			[]string{"line"}},
		{"class weights word", "train:\n  loss:\n    class_weights: balanced\n",
			[]string{"line 3", "train.loss.class_weights", "auto or a list"}},
		{"class weights count", "train:\n  loss:\n    class_weights: [1, 2]\n",
			[]string{"train.loss.class_weights", "2 weights for 4 classes"}},
		{"loss kind", "train:\n  loss:\n    kind: dise\n",
			[]string{"train.loss.kind", "ce, dice, ce+dice or focal"}},
		{"optimizer kind", "train:\n  optimizer: adagrad\n",
			[]string{"train.optimizer", "adam, adamw, sgd or rmsprop"}},
		{"nesterov without momentum", "train:\n  optimizer: sgd\n  nesterov: true\n",
			[]string{"train.nesterov", "train.momentum > 0"}},
		{"unknown anchor", "train:\n  steps: *a\n",
			[]string{"anchor"}},
		{"self-referencing alias", "train:\n  betas: &a [*a]\n",
			[]string{"line 2", "train.betas"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, "bad.yaml", tc.src, nil)
			if err == nil {
				t.Fatalf("Parse succeeded on %q", tc.src)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "bad.yaml: ") {
				t.Errorf("error %q does not start with the file name", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

func TestValid(t *testing.T) {
	for _, tc := range []struct {
		name  string
		src   string
		check func(Config) bool
	}{
		{"epochs instead of steps", "train:\n  steps: 0\n  epochs: 3\n",
			func(c Config) bool { return c.Train.Steps == 0 && c.Train.Epochs == 3 }},
		{"transpose group norm", "model:\n  up: transpose\n  norm: group\n  groups: 4\n",
			func(c Config) bool {
				return c.Model.Up == "transpose" && c.Model.Norm == "group" && c.Model.Groups == 4
			}},
		{"capacity with unit", "memory:\n  capacity: 512MiB\n  timeline: true\n",
			func(c Config) bool { return c.Memory.Capacity == 512<<20 && c.Memory.Timeline }},
		{"capacity with space and lower case", "memory:\n  capacity: 6 gib\n",
			func(c Config) bool { return c.Memory.Capacity == 6<<30 }},
		{"capacity integer", "memory:\n  capacity: 1048576\n",
			func(c Config) bool { return c.Memory.Capacity == 1<<20 }},
		{"betas flow and block", "train:\n  betas:\n    - 0.5\n    - 0.9\n",
			func(c Config) bool { return reflect.DeepEqual(c.Train.Betas, []float64{0.5, 0.9}) }},
		{"depth 1 size 18", "model:\n  depth: 1\ndata:\n  size: 18\n",
			func(c Config) bool { return c.Data.Size == 18 }},
		{"anchor and alias", "train:\n  seed: &s 7\nmodel:\n  seed: *s\n",
			func(c Config) bool { return c.Train.Seed == 7 && c.Model.Seed == 7 }},
		{"checkpoint auto", "model:\n  checkpoint: auto\n",
			func(c Config) bool { return c.Model.Checkpoint.Auto && c.Model.Checkpoint.String() == "auto" }},
		{"class weights auto", "train:\n  loss:\n    kind: focal\n    class_weights: auto\n",
			func(c Config) bool { return c.Train.Loss.ClassWeights.Auto && c.Train.Loss.Kind == "focal" }},
		{"class weights list", "train:\n  loss:\n    class_weights: [1, 2.5, 0, 4]\n",
			func(c Config) bool {
				return reflect.DeepEqual(c.Train.Loss.ClassWeights, ClassWeights{Values: []float64{1, 2.5, 0, 4}})
			}},
		{"class weights empty", "train:\n  loss:\n    class_weights: []\n",
			func(c Config) bool { return reflect.DeepEqual(c.Train.Loss.ClassWeights, ClassWeights{}) }},
		{"other keys keep defaults", "train:\n  lr: 0.01\n",
			func(c Config) bool {
				d := Default()
				d.Train.LR = 0.01
				return reflect.DeepEqual(c, d)
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parse(t, "ok.yaml", tc.src, nil)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if !tc.check(c) {
				t.Errorf("unexpected config: %+v", c)
			}
		})
	}
}

func TestOverrides(t *testing.T) {
	qs := string(readQuickstart(t))
	for _, tc := range []struct {
		name      string
		src       string
		overrides []string
		want      func(*Config) // applied to Default() to give the expected config
	}{
		{"steps", qs, []string{"train.steps=50"}, func(c *Config) { c.Train.Steps = 50 }},
		{"up transpose", qs, []string{"model.up=transpose"}, func(c *Config) { c.Model.Up = "transpose" }},
		{"key missing from file", "train:\n  lr: 0.01\n", []string{"train.val_every=7"},
			func(c *Config) { c.Train.LR, c.Train.ValEvery = 0.01, 7 }},
		{"section missing from file", "train:\n  lr: 0.01\n", []string{"memory.capacity=6GiB"},
			func(c *Config) { c.Train.LR, c.Memory.Capacity = 0.01, 6<<30 }},
		{"empty file", "", []string{"output.progress=plain", "output.dir=runs/x"},
			func(c *Config) { c.Output.Progress, c.Output.Dir = "plain", "runs/x" }},
		{"empty section", "train:\n", []string{"train.steps=5"}, func(c *Config) { c.Train.Steps = 5 }},
		{"list replaces", qs, []string{"train.betas=[0.8, 0.99]"},
			func(c *Config) { c.Train.Betas = []float64{0.8, 0.99} }},
		{"later wins", qs, []string{"train.steps=50", "train.steps=60"}, func(c *Config) { c.Train.Steps = 60 }},
		{"switch to epochs", qs, []string{"train.steps=0", "train.epochs=4"},
			func(c *Config) { c.Train.Steps, c.Train.Epochs = 0, 4 }},
		{"value with equals sign", qs, []string{"output.dir=runs/a=b"}, func(c *Config) { c.Output.Dir = "runs/a=b" }},
		{"quoted string", qs, []string{`output.dir="123"`}, func(c *Config) { c.Output.Dir = "123" }},
		{"whole section", qs, []string{"memory={capacity: 1GiB, timeline: true}"},
			func(c *Config) {
				c.Memory = Memory{Capacity: 1 << 30, Timeline: true, EmptyCache: "never", Offload: "none", Fit: "off", Allocator: "arena"}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parse(t, "quickstart.yaml", tc.src, tc.overrides)
			if err != nil {
				t.Fatalf("Parse with --set %q: %v", tc.overrides, err)
			}
			want := Default()
			tc.want(&want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got differs from want: %s", strings.Join(diff(got, want), "; "))
			}
		})
	}
}

func TestOverrideErrors(t *testing.T) {
	qs := string(readQuickstart(t))
	for _, tc := range []struct {
		name      string
		src       string
		overrides []string
		want      []string
	}{
		{"unknown key", qs, []string{"train.nope=1"},
			[]string{"quickstart.yaml", "--set", `"train.nope"`, "known keys:", "batch_size"}},
		{"unknown key in missing section", "", []string{"train.nope=1"},
			[]string{"quickstart.yaml", "--set", `"train.nope"`, "known keys:"}},
		{"unknown section", qs, []string{"trian.steps=1"},
			[]string{"--set", `"trian"`, "known keys: cuda, data, device, dist, memory, model, output, predict, train"}},
		{"no equals sign", qs, []string{"train.steps"},
			[]string{"--set", `"train.steps"`, "section.key=value"}},
		{"empty key", qs, []string{"=5"},
			[]string{"--set", "section.key=value"}},
		{"wrong type", qs, []string{"train.batch_size=abc"},
			[]string{"quickstart.yaml", "--set", "train.batch_size", `"abc"`, "want an integer"}},
		{"wrong type list", qs, []string{"train.betas=0.9"},
			[]string{"--set", "train.betas", "want a list"}},
		{"wrong type size", qs, []string{"memory.capacity=lots"},
			[]string{"--set", "memory.capacity", "lots", "6GiB"}},
		{"section set to scalar", qs, []string{"train=5"},
			[]string{"--set", "train", "must be a mapping"}},
		{"key below a value", qs, []string{"train.steps.x=1"},
			[]string{"--set train.steps.x", "train.steps is not a section"}},
		{"invalid YAML value", qs, []string{"train.betas=[0.8,"},
			[]string{"--set train.betas", "not valid YAML"}},
		{"top level not a mapping", "[1, 2]\n", []string{"train.steps=1"},
			[]string{"--set train.steps", "top level"}},
		{"list replaces, not merges", qs, []string{"train.betas=[0.5]"},
			[]string{"train.betas", "[0.5]", "two numbers"}},
		{"validation after override", qs, []string{"data.size=30"},
			[]string{"--set data.size", "not divisible"}},
		// A file's own value is still the file's to name.
		{"validation of the file's value", qs, []string{"model.depth=6"},
			[]string{"quickstart.yaml: data.size", "not divisible"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parse(t, "quickstart.yaml", tc.src, tc.overrides)
			if err == nil {
				t.Fatalf("Parse with --set %q succeeded", tc.overrides)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "line 0") {
				t.Errorf("error %q names line 0 instead of --set", err)
			}
		})
	}
}

func TestParseByteSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want ByteSize
		ok   bool
	}{
		{"6GiB", 6 << 30, true},
		{"512MiB", 512 << 20, true},
		{"512 MiB", 512 << 20, true},
		{"1.5GB", 1.5e9, true},
		{"1048576", 1 << 20, true},
		{"0", 0, true},
		{"6 gib", 6 << 30, true},
		{"  2KiB  ", 2048, true},
		{"3kb", 3000, true},
		{"1TiB", 1 << 40, true},
		{"2TB", 2e12, true},
		{"4M", 4 << 20, true},
		{"1G", 1 << 30, true},
		{"100B", 100, true},
		{"", 0, false},
		{"   ", 0, false},
		{"-1GiB", 0, false},
		{"-1", 0, false},
		{"lots", 0, false},
		{"NaN", 0, false},
		{"NaNGiB", 0, false},
		{"Inf", 0, false},
		{"+InfGiB", 0, false},
		{"GiB", 0, false},
		{"6GiBs", 0, false},
		{"6 G i B", 0, false},
		{"1e30", 0, false},
		{"5000000TiB", 0, false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseByteSize(tc.in)
			if tc.ok {
				if err != nil || got != tc.want {
					t.Errorf("ParseByteSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
				}
				return
			}
			if err == nil {
				t.Errorf("ParseByteSize(%q) = %d, want an error", tc.in, got)
			} else if !strings.Contains(err.Error(), "6GiB") || !strings.Contains(err.Error(), "not a size") {
				t.Errorf("ParseByteSize(%q) error %q does not say how to write a size", tc.in, err)
			}
		})
	}
}

func TestByteSizeMarshal(t *testing.T) {
	for _, tc := range []struct {
		in   ByteSize
		want string
	}{
		{0, "0"},
		{6 << 30, "6GiB"},
		{512 << 20, "512MiB"},
		{1536 << 20, "1536MiB"},
		{3 << 40, "3TiB"},
		{2048, "2KiB"},
		{1.5e9, "1500000000"},
		{100, "100"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			b, err := yaml.Marshal(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSpace(string(b)); got != tc.want {
				t.Errorf("Marshal(%d) = %q, want %q", int64(tc.in), got, tc.want)
			}
			var back ByteSize
			if err := yaml.Unmarshal(b, &back); err != nil || back != tc.in {
				t.Errorf("Unmarshal(%q) = %d, %v; want %d", b, back, err, tc.in)
			}
		})
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
	}{
		{"default", func(*Config) {}},
		{"capacity 6GiB", func(c *Config) { c.Memory.Capacity = 6 << 30 }},
		{"capacity 1.5GB", func(c *Config) { c.Memory.Capacity = 1.5e9 }},
		{"class weights auto", func(c *Config) { c.Train.Loss = Loss{Kind: "focal", ClassWeights: ClassWeights{Auto: true}, Gamma: 2} }},
		{"everything changed", func(c *Config) {
			c.Model = Model{Arch: model.Arch{InChannels: 3, Classes: 2, Base: 16, Depth: 4, Up: "transpose", Norm: "group", Groups: 4}, Seed: math.MaxUint64, Checkpoint: Checkpoint{Levels: []int{0, 2}}, ConvAlgo: "winograd"}
			c.Data = data.Config{Source: "synthetic", Count: 100, Size: 64, Noise: 0, Seed: 9, ValFraction: 0.3, Resize: []int{48, 32}}
			c.Train = Train{Optimizer: "sgd", Momentum: 0.9, Nesterov: true, Alpha: 0.5, BatchSize: 3, Epochs: 2, LR: 1e-4, Betas: []float64{0, 0.5}, Eps: 1e-6, WeightDecay: 0.01, Seed: 5, ValEvery: 0,
				Precision: backend.Float16, Accumulate: 4,
				Scaler:   Scaler{Enabled: "true", InitScale: 1024, GrowthFactor: 4, BackoffFactor: 0.25, GrowthInterval: 10},
				Schedule: Schedule{Kind: "cosine", Warmup: 3, StepSize: 7, Gamma: 0.5, MinLR: 1e-6, Patience: 2, Factor: 0.25, Threshold: 0.01},
				Loss:     Loss{Kind: "ce+dice", ClassWeights: ClassWeights{Values: []float64{1, 3}}, Gamma: 0.5, DiceSmooth: 1e-6},
				Monitor:  "val_dice", Init: "runs/base", InitSkip: []string{"outc"}, Freeze: []string{"encoder"}}
			c.Memory = Memory{Capacity: 123456789, Timeline: true, EmptyCache: "oom", Offload: "checkpoints", Fit: "auto", Allocator: "caching", Poison: true}
			c.Output = Output{Dir: "runs/a: b # c", Progress: "none", LogEvery: 1}
		}},
		{"checkpoint all", func(c *Config) { c.Model.Checkpoint = Checkpoint{All: true} }},
		{"checkpoint auto", func(c *Config) { c.Model.Checkpoint = Checkpoint{Auto: true} }},
		{"awkward dir", func(c *Config) { c.Output.Dir = "yes" }},
		{"numeric dir", func(c *Config) { c.Output.Dir = "0x10" }},
		{"multi-line dir", func(c *Config) { c.Output.Dir = "a\n\tb\n" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Default()
			tc.edit(&c)
			if err := c.Validate(); err != nil {
				t.Fatalf("test config invalid: %v", err)
			}
			b, err := c.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if c.Memory.Capacity == 6<<30 && !strings.Contains(string(b), "capacity: 6GiB") {
				t.Errorf("Marshal wrote the capacity other than as 6GiB:\n%s", b)
			}
			back, err := parse(t, "resolved.yaml", string(b), nil)
			if err != nil {
				t.Fatalf("Parse(Marshal(c)): %v\n%s", err, b)
			}
			if !reflect.DeepEqual(back, c) {
				t.Errorf("round trip changed: %s\n%s", strings.Join(diff(back, c), "; "), b)
			}
		})
	}
}

// fuzzSeeds are sources for FuzzParse: the quickstart file and every source of
// the table tests above.
var fuzzSeeds = []string{
	"", "# c\n", "---\n", "~\n", "train:\n", "model:\n  base: 8\n---\n",
	"modle:\n  base: 8\n", "train:\n  steps: 10\n  batchsize: 4\n", "train:\n  batch_size: \"abc\"\n",
	"train:\n  betas: 3\n", "train:\n  betas: [0.9, x]\n", "memory:\n  capacity: \"lots\"\n",
	"memory:\n  capacity: 6GiB\n", "train:\n  batch_size: -1\n", "model:\n  depth: 3\ndata:\n  size: 30\n",
	"train:\n  steps: 10\n  steps: 20\n", "train:\n  steps: 0\n  epochs: 0\n", "train:\n  epochs: 2\n",
	"train:\n\tsteps: 10\n", "train:\n  betas: [0.9, 0.999\n", "model:\n  up: nearest\n",
	"model:\n  norm: group\n  groups: 3\n", "output:\n  progress: fancy\n", "data:\n  count: 4\n  val_fraction: 0.1\n",
	"data:\n  noise: .nan\n", "train:\n  lr: .inf\n", "model:\n  norm: group\n  base: 2305843009213693952\n",
	"train:\n  steps: 10\n---\ntrain:\n  steps: 20\n", "train:\n  betas: &a [*a]\n",
	"train:\n  seed: &s 7\nmodel:\n  seed: *s\n", "train: 5\n", "- a\n",
}

// checkParsed is the property both fuzzers check: an error that names where
// it came from, or a valid Config that survives Marshal and Parse unchanged.
func checkParsed(t *testing.T, c Config, err error, overrides []string) {
	if err != nil {
		msg := err.Error()
		if !strings.HasPrefix(msg, "fuzz.yaml: ") && !(len(overrides) > 0 && strings.HasPrefix(msg, "--set ")) {
			t.Fatalf("error %q names neither the file nor --set", msg)
		}
		return
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("Parse returned a config that fails Validate: %v", err)
	}
	b, err := c.Marshal()
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	back, err := Parse("resolved.yaml", b, nil)
	if err != nil {
		t.Fatalf("Parse(Marshal(c)): %v\n%s", err, b)
	}
	if !reflect.DeepEqual(back, c) {
		t.Fatalf("Marshal/Parse round trip changed: %s\n%s", strings.Join(diff(back, c), "; "), b)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(readQuickstart(f))
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		c, err := Parse("fuzz.yaml", src, nil)
		checkParsed(t, c, err, nil)
	})
}

func FuzzOverride(f *testing.F) {
	qs := readQuickstart(f)
	for _, o := range []string{
		"train.steps=50", "model.up=transpose", "train.nope=1", "train.steps", "=5", "train.batch_size=abc",
		"train.betas=[0.8, 0.99]", "train.betas=[0.5]", "memory.capacity=6GiB", "memory.capacity=lots",
		"train=5", "train.steps.x=1", "train.betas=[0.8,", "memory={capacity: 1GiB, timeline: true}",
		"output.dir=runs/a=b", "data.noise=.nan", "train.lr=.inf", "model.base=2305843009213693952",
		"train.steps=", "model.norm=group", "a.b.c=1",
		"train.loss.class_weights=auto", "train.loss.class_weights=[1, 2, 0, 4]", "train.loss.kind=focal",
		"model.checkpoint=auto", "memory.allocator=caching", "train.optimizer=rmsprop", "dist.bucket_mb=-1",
	} {
		f.Add(o)
	}
	f.Fuzz(func(t *testing.T, o string) {
		c, err := Parse("fuzz.yaml", qs, []string{o})
		checkParsed(t, c, err, []string{o})
	})
}

// Asking for epochs alone replaces the default step budget rather than
// conflicting with it.
func TestEpochsAloneReplaceDefaultSteps(t *testing.T) {
	for _, tc := range []struct {
		name      string
		src       string
		overrides []string
	}{
		{"file", "train:\n  epochs: 2\n", nil},
		{"override", "", []string{"train.epochs=2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse("e.yaml", []byte(tc.src), tc.overrides)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Train.Epochs != 2 || cfg.Train.Steps != 0 {
				t.Errorf("epochs %d steps %d, want 2 and 0", cfg.Train.Epochs, cfg.Train.Steps)
			}
		})
	}
}

func TestVariantKeys(t *testing.T) {
	cfg, err := Parse("v.yaml", []byte("model:\n  checkpoint: all\n  depth: 2\ndata:\n  size: 30\n  resize: [16, 24]\ntrain:\n  precision: bf16\n  accumulate: 4\n  scaler:\n    enabled: true\nmemory:\n  empty_cache: step\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.ModelConfig().Recompute; len(got) != 3 || got[2] != 2 {
		t.Errorf("checkpoint all at depth 2 resolved to %v, want [0 1 2]", got)
	}
	if h, w := cfg.ImageSize(); h != 16 || w != 24 {
		t.Errorf("image size %dx%d, want 16x24", h, w)
	}
	if !cfg.ScalerEnabled() || cfg.Train.Accumulate != 4 || cfg.Train.Precision != backend.BFloat16 || cfg.Memory.EmptyCache != EmptyStep {
		t.Errorf("variant keys not decoded: %+v %+v", cfg.Train, cfg.Memory)
	}
	for _, tc := range []struct {
		prec, enabled string
		want          bool
	}{{"fp16", "auto", true}, {"bf16", "auto", false}, {"fp32", "auto", false}, {"fp16", "false", false}, {"bf16", "true", true}} {
		c := Default()
		if err := c.Train.Precision.UnmarshalText([]byte(tc.prec)); err != nil {
			t.Fatal(err)
		}
		c.Train.Scaler.Enabled = Switch(tc.enabled)
		if c.ScalerEnabled() != tc.want {
			t.Errorf("precision %s, enabled %s: scaler %v, want %v", tc.prec, tc.enabled, !tc.want, tc.want)
		}
	}
}

// TestEmptyAndUnderflowingValues: --set with an empty value is an error
// (for numbers and strings alike), and a number that underflows to 0 is
// refused naming what was written, not shown as 0.
func TestEmptyAndUnderflowingValues(t *testing.T) {
	for _, tc := range []struct {
		file string
		sets []string
		want []string
	}{
		{"", []string{"train.lr="}, []string{"--set train.lr=", "empty"}},
		{"", []string{"data.path="}, []string{"--set data.path=", "empty", `""`}},
		{"", []string{"train.lr=1e-400"}, []string{"train.lr", "1e-400", "read as 0"}},
		{"train:\n  lr: 1e-400\n", nil, []string{"line 2", "train.lr", "1e-400", "read as 0"}},
		{"train:\n  weight_decay: 0.0e-500\n", nil, nil},
	} {
		_, err := Parse("x.yaml", []byte(tc.file), tc.sets)
		if tc.want == nil {
			if err != nil {
				t.Errorf("%q %v: %v, want no error (a zero written as zero)", tc.file, tc.sets, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%q %v: no error", tc.file, tc.sets)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q %v: %v lacks %q", tc.file, tc.sets, err, w)
			}
		}
	}
}

// TestCUDAConvKeys: cuda.conv, cuda.workspace and cuda.deterministic parse
// from a file and from --set, default to auto, 256 MiB and true, and a
// wrong value names the key and what it may be. A CPU run accepts them
// (they apply to the CUDA backend only).
func TestCUDAConvKeys(t *testing.T) {
	d := Default().CUDA
	if d.Conv != "auto" || d.WorkspaceMiB != DefaultWorkspaceMiB || !d.Deterministic {
		t.Errorf("defaults: conv %q workspace %d deterministic %v; want auto, %d, true", d.Conv, d.WorkspaceMiB, d.Deterministic, DefaultWorkspaceMiB)
	}
	if p := Default().ConvPolicy(); p.WorkspaceBytes != 256<<20 || !p.Deterministic {
		t.Errorf("default ConvPolicy %+v, want 256 MiB, deterministic", p)
	}
	for _, conv := range ConvProviders {
		for _, src := range []struct {
			file string
			sets []string
		}{
			{"cuda:\n  conv: " + conv + "\n  workspace: 0\n  deterministic: false\n", nil},
			{"device: cpu\n", []string{"cuda.conv=" + conv, "cuda.workspace=0", "cuda.deterministic=false"}},
		} {
			got, err := parse(t, "c.yaml", src.file, src.sets)
			if err != nil {
				t.Fatalf("%q --set %q: %v", src.file, src.sets, err)
			}
			if got.CUDA.Conv != conv || got.CUDA.WorkspaceMiB != 0 || got.CUDA.Deterministic {
				t.Errorf("%q --set %q: got %+v", src.file, src.sets, got.CUDA)
			}
		}
	}
	for _, tc := range []struct {
		set  string
		want []string
	}{
		{"cuda.conv=cuDNN", []string{"--set cuda.conv", `"cuDNN"`, "auto, cudnn or memunet"}},
		{"cuda.conv=", []string{"--set cuda.conv=", "value is empty"}},
		{"cuda.conv=torch", []string{"cuda.conv", `"torch"`, "auto, cudnn or memunet"}},
		{"cuda.workspace=-1", []string{"cuda.workspace", "-1", "MiB", "e.g. 256"}},
		{"cuda.workspace=2097152", []string{"cuda.workspace", "2097152", "up to 1048576"}},
		{"cuda.workspace=1.5", []string{"--set", "cuda.workspace", "want an integer"}},
		{"cuda.workspace=256MiB", []string{"--set", "cuda.workspace", "want an integer"}},
		{"cuda.deterministic=maybe", []string{"--set", "cuda.deterministic", "true or false"}},
	} {
		_, err := parse(t, "c.yaml", "", []string{tc.set})
		if err == nil {
			t.Errorf("--set %s: accepted", tc.set)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("--set %s: error %q does not say %q", tc.set, err, w)
			}
		}
	}
}
