package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// onnxPython is a python3 with the onnx package (Debian's python3-onnx),
// or "".
func onnxPython() string {
	for _, py := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(py, "-c", "import onnx").Run() == nil {
			return py
		}
	}
	return ""
}

// TestExportONNX: --format onnx writes model-step-N.onnx into the run
// directory by default and --out where asked, in fp32 and fp16, with and
// without the normalisation and the softmax; where python3 has onnx
// (Debian's python3-onnx) each file passes onnx.checker.check_model with
// full shape inference, and the metadata carries the model config.
// ONNX Runtime's figures come from tools/check/onnx-check.
func TestExportONNX(t *testing.T) {
	runDir, sum := trainTiny(t, "--set", "model.norm=group", "--set", "model.groups=2", "--set", "model.up=transpose")
	stdout := runOK(t, "export", "--checkpoint", runDir, "--format", "onnx")
	def := filepath.Join(runDir, "model-step-00000004.onnx")
	if _, err := os.Stat(def); err != nil || !strings.Contains(stdout, def) {
		t.Fatalf("export --format onnx: %v, stdout %q; want %s", err, stdout, def)
	}
	files := []string{def}
	tmp := t.TempDir()
	for _, args := range [][]string{
		{"--dtype", "fp16"},
		{"--with-normalize", "--with-softmax"},
		{"--dtype", "fp16", "--with-normalize"},
	} {
		out := filepath.Join(tmp, strings.Join(args, "")+".onnx")
		runOK(t, append([]string{"export", "--checkpoint", sum.LastCheckpoint, "--format", "onnx", "--out", out}, args...)...)
		files = append(files, out)
	}
	py := onnxPython()
	if py == "" {
		t.Skip("no python3 with onnx (Debian: apt-get install python3-onnx): the files were written but not checked")
	}
	script := `import sys, onnx
for path in sys.argv[1:]:
    m = onnx.load(path)
    onnx.checker.check_model(m, full_check=True)
    meta = {p.key: p.value for p in m.metadata_props}
    assert '"norm":"group"' in meta["memunet_model"], meta
    assert meta["memunet_checkpoint_step"] == "4", meta
    out = m.graph.output[0]
    dims = [d.dim_param or d.dim_value for d in out.type.tensor_type.shape.dim]
    print(path, m.opset_import[0].version, out.name, dims)
`
	b, err := exec.Command(py, append([]string{"-c", script}, files...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("onnx.checker: %v\n%s", err, b)
	}
	t.Logf("onnx.checker.check_model passed:\n%s", b)
	if !strings.Contains(string(b), "probabilities ['N', 4, 'H', 'W']") || !strings.Contains(string(b), "logits ['N', 4, 'H', 'W']") {
		t.Errorf("outputs: %s", b)
	}
}

// TestExportONNXRefuses: a dtype the graph cannot take, ONNX flags without
// --format onnx, an unknown format, a run without weights, a corrupt
// checkpoint and --out onto the checkpoint: each a clear error, nothing
// written or overwritten.
func TestExportONNXRefuses(t *testing.T) {
	runDir, sum := trainTiny(t)
	tmp := t.TempDir()
	out := filepath.Join(tmp, "m.onnx")
	empty := t.TempDir()
	corrupt := filepath.Join(tmp, "corrupt")
	if err := os.CopyFS(corrupt, os.DirFS(sum.LastCheckpoint)); err != nil {
		t.Fatal(err)
	}
	weights := filepath.Join(corrupt, "model.safetensors")
	b, err := os.ReadFile(weights)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 0xff
	if err := os.WriteFile(weights, b, 0o644); err != nil {
		t.Fatal(err)
	}
	model := filepath.Join(sum.LastCheckpoint, "model.safetensors")
	before, _ := os.ReadFile(model)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--checkpoint", runDir, "--format", "onnx", "--dtype", "bf16", "--out", out}, 2, "--dtype bf16"},
		{[]string{"--checkpoint", runDir, "--with-softmax", "--out", out}, 2, "--format onnx"},
		{[]string{"--checkpoint", runDir, "--format", "tflite", "--out", out}, 2, `--format "tflite"`},
		{[]string{"--checkpoint", empty, "--format", "onnx", "--out", out}, 1, empty},
		{[]string{"--checkpoint", corrupt, "--format", "onnx", "--out", out}, 1, "model.safetensors is corrupt"},
		{[]string{"--checkpoint", runDir, "--format", "onnx", "--out", model}, 2, "--out " + model},
		{[]string{"--checkpoint", runDir, "--format", "onnx", "--out", filepath.Join(sum.LastCheckpoint, "m.onnx")}, 2, "--out "},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"export"}, c.args...), &stdout, &stderr)
		msg := strings.TrimSpace(stderr.String())
		if code != c.code || !strings.Contains(msg, c.want) || strings.Contains(msg, "panic") {
			t.Errorf("export %v: exit %d, %q; want exit %d naming %q", c.args, code, msg, c.code, c.want)
		}
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a refused export wrote %s", out)
	}
	if after, _ := os.ReadFile(model); !bytes.Equal(after, before) {
		t.Errorf("an export changed the checkpoint's model.safetensors")
	}
	if m, _ := filepath.Glob(filepath.Join(sum.LastCheckpoint, "*.onnx")); len(m) > 0 {
		t.Errorf("an export wrote into the checkpoint: %v", m)
	}
}

// TestDocsONNXSnippet: docs/guide/export.md's Node.js line runs as written on an
// ONNX export of the default name, where onnxruntime-node is installed in
// tools/check/onnx-check (tools/check/onnx-check/run.sh --install).
func TestDocsONNXSnippet(t *testing.T) {
	modules, err := filepath.Abs("../../tools/check/onnx-check/node_modules")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(modules, "onnxruntime-node")); err != nil {
		t.Skip("onnxruntime-node is not installed (tools/check/onnx-check/run.sh --install)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node")
	}
	page, err := os.ReadFile("../../docs/guide/export.md")
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for _, l := range strings.Split(string(page), "\n") {
		if strings.HasPrefix(l, `node -e "`) && strings.Contains(l, "onnxruntime-node") {
			line = l
		}
	}
	const example = "runs/q/model-step-00000800.onnx"
	if !strings.Contains(line, example) {
		t.Fatalf("docs/guide/export.md has no node -e line running %s", example)
	}
	code := strings.TrimSuffix(strings.TrimPrefix(line, `node -e "`), `"`)
	runDir, _ := trainTiny(t)
	runOK(t, "export", "--checkpoint", runDir, "--format", "onnx")
	code = strings.ReplaceAll(code, example, filepath.Join(runDir, "model-step-00000004.onnx"))
	cmd := exec.Command(node, "-e", code)
	cmd.Env = append(os.Environ(), "NODE_PATH="+modules)
	out, err := cmd.CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "[ 1, 4, 64, 64 ]" {
		t.Fatalf("the docs/guide/export.md line: %v\n%s", err, out)
	}
}
