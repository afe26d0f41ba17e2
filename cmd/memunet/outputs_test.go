//go:build unix

package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memunet/memunet/internal/nodetest"
)

// runChild runs memunet (this test binary as main) with args for at most
// a minute: a command that opened a FIFO to write would wait for a reader
// for ever. It returns the exit code and stderr.
func runChild(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = append(os.Environ(), "MEMUNET_TEST_AS_MAIN=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("memunet %s: still running after a minute (blocked on its --out?); stderr: %s", strings.Join(args, " "), stderr.String())
	}
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// TestOutputsRefuseDevicesAndFIFOs: every command that writes, given an
// output that is a FIFO, a character device or a socket made in a
// temporary folder (never /dev itself), exits non-zero, names the path
// and what it is, and leaves the node as it was: it is never replaced by
// a regular file, written into, or waited on. mknod(2) of the device
// needs root or CAP_MKNOD: that case is skipped, with the reason, where
// it is refused.
func TestOutputsRefuseDevicesAndFIFOs(t *testing.T) {
	if testing.Short() {
		t.Skip("trains a tiny run and starts a child per command")
	}
	runDir, _ := trainTiny(t)
	quick := "../../configs/quickstart.yaml"
	for _, n := range nodetest.Nodes() {
		t.Run(n.Name, func(t *testing.T) {
			// A short folder: a socket's path is limited to ~100 bytes.
			dir, err := os.MkdirTemp("", "memunet-out")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			node := filepath.Join(dir, "out.png") // data preview takes only a .png
			n.Make(t, node)
			for _, c := range []struct {
				// flag, where set, is the flag the refusal names: the
				// command checks it before any work (a usage error).
				flag string
				args []string
			}{
				{"--out", []string{"export", "--checkpoint", runDir, "--out", node}},
				{"--out", []string{"export", "--checkpoint", runDir, "--format", "onnx", "--out", node}},
				{"--out", []string{"eval", "--checkpoint", runDir, "--out", node}},
				{"--out", []string{"predict", "--checkpoint", runDir, "--input", "dataset:val", "--out", node}},
				{"--out", []string{"data", "preview", "--config", quick, "--set", "data.size=16", "--count", "2", "--out", node}},
				{"--cpuprofile", []string{"bench", "--config", quick, "--set", "data.size=16", "--set", "model.base=4", "--set", "model.depth=2", "--steps", "1", "--variants", "baseline", "--cpuprofile", node}},
				// These take the folder first thing (outdir.Acquire).
				{"", append([]string{"train", "--config", quick, "--out", node}, tinyArgs...)},
				{"", []string{"data", "synth", "--out", node, "--count", "2", "--size", "16"}},
				{"", []string{"compare", "--config", quick, "--steps", "1", "--variants", "baseline", "--out", node}},
				{"", []string{"compare", "--runs", runDir, "--out", node}},
			} {
				code, stderr := runChild(t, c.args...)
				cmd := strings.Join(c.args[:2], " ")
				refusal := node + ": is " + n.What + ", not a "
				if c.flag != "" {
					refusal = c.flag + " " + refusal
					if code != 2 {
						t.Errorf("%s ... %s: exit %d, want 2: refused as a usage error before any work", cmd, node, code)
					}
				}
				if code == 0 || !strings.Contains(stderr, refusal) {
					t.Errorf("%s ... %s: exit %d, stderr %q: want a refusal naming it as %s (%q)", cmd, node, code, stderr, n.What, refusal)
				}
				if st, err := os.Lstat(node); err != nil {
					t.Fatalf("%s ... %s: the %s is gone: %v", cmd, node, n.Name, err)
				} else if st.Mode().Type() != n.Mode {
					t.Fatalf("%s ... %s: the %s is now %v", cmd, node, n.Name, st.Mode())
				}
				if entries, _ := os.ReadDir(dir); len(entries) != 1 {
					t.Errorf("%s: the folder holds %d entries, want only the %s", cmd, len(entries), n.Name)
				}
			}
		})
	}
}
