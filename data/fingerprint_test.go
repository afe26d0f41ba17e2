package data

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// storedMaskFolder writes n 16x16 images and 2-class gray masks stored
// uncompressed, so that every mask file has the same size whatever it holds.
func storedMaskFolder(t *testing.T, dir string, n int) {
	t.Helper()
	enc := png.Encoder{CompressionLevel: png.NoCompression}
	for i := range n {
		img, cls := scene(i, 16, 16, 2)
		writeFile(t, filepath.Join(dir, "images", fmt.Sprintf("%02d.png", i)), encodePNG(t, img))
		var b bytes.Buffer
		if err := enc.Encode(&b, &image.Gray{Pix: cls, Stride: 16, Rect: image.Rect(0, 0, 16, 16)}); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "masks", fmt.Sprintf("%02d.png", i)), b.Bytes())
	}
}

// swapFiles swaps two files by renames, as mv does: each keeps its own
// modification time.
func swapFiles(t *testing.T, a, b string) {
	t.Helper()
	tmp := a + ".swap"
	for _, mv := range [][2]string{{a, tmp}, {b, a}, {tmp, b}} {
		if err := os.Rename(mv[0], mv[1]); err != nil {
			t.Fatal(err)
		}
	}
}

// rewriteKeepingTime rewrites the file at path with edit's bytes of the
// same length and puts its modification time back.
func rewriteKeepingTime(t *testing.T, path string, edit func([]byte) []byte) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	nb := edit(bytes.Clone(b))
	if len(nb) != len(b) || bytes.Equal(nb, b) {
		t.Fatalf("%s: the edit must keep the size and change the bytes", path)
	}
	writeFile(t, path, nb)
	if err := os.Chtimes(path, time.Time{}, st.ModTime()); err != nil {
		t.Fatal(err)
	}
}

// TestFingerprintCoversContents: a checkpoint's data fingerprint, stored
// as the manifest stores it (JSON), differs from the data's at resume when
// two same-size masks were swapped or a file rewritten in place with its
// size and modification time kept, and the difference names the change;
// untouched data does not differ. A fingerprint of a checkpoint written
// before Contents was kept is compared by its file list, as it was.
func TestFingerprintCoversContents(t *testing.T) {
	folder := func(t *testing.T, dir string) SourceConfig {
		storedMaskFolder(t, dir, 4)
		a, _ := os.Stat(filepath.Join(dir, "masks", "00.png"))
		b, _ := os.Stat(filepath.Join(dir, "masks", "01.png"))
		if a.Size() != b.Size() {
			t.Fatalf("mask sizes %d and %d; the test needs them equal", a.Size(), b.Size())
		}
		return folderConfig(dir)
	}
	nifti := func(t *testing.T, dir string) SourceConfig {
		writeNIfTISet(t, dir, 3, []int{8, 6, 5}) // masks/case1.nii is stored uncompressed
		return niftiConfig(dir)
	}
	swapMasks := func(t *testing.T, dir string) {
		swapFiles(t, filepath.Join(dir, "masks", "00.png"), filepath.Join(dir, "masks", "01.png"))
	}
	contents := "contents: images or masks were rewritten with the same names and sizes (edited, or swapped with one another)"
	for _, tc := range []struct {
		name   string
		open   func(t *testing.T, dir string) SourceConfig
		change func(t *testing.T, dir string)
		old    bool   // the checkpoint's fingerprint without Contents
		want   string // "": no difference
	}{
		{"folder untouched", folder, func(*testing.T, string) {}, false, ""},
		{"folder masks swapped", folder, swapMasks, false, contents},
		{"folder mask edited, size and time kept", folder, func(t *testing.T, dir string) {
			rewriteKeepingTime(t, filepath.Join(dir, "masks", "02.png"), func(b []byte) []byte {
				m, err := png.Decode(bytes.NewReader(b))
				if err != nil {
					t.Fatal(err)
				}
				g := m.(*image.Gray)
				g.Pix[0] ^= 1
				var out bytes.Buffer
				(&png.Encoder{CompressionLevel: png.NoCompression}).Encode(&out, g)
				return out.Bytes()
			})
		}, false, contents},
		{"folder masks swapped, old checkpoint", folder, swapMasks, true, ""},
		{"folder pair renamed, old checkpoint", folder, func(t *testing.T, dir string) {
			for _, sub := range []string{"images", "masks"} {
				if err := os.Rename(filepath.Join(dir, sub, "03.png"), filepath.Join(dir, sub, "zz.png")); err != nil {
					t.Fatal(err)
				}
			}
		}, true, "files: images or masks were added, removed, renamed"},
		{"nifti untouched", nifti, func(*testing.T, string) {}, false, ""},
		{"nifti mask voxel edited, size and time kept", nifti, func(t *testing.T, dir string) {
			rewriteKeepingTime(t, filepath.Join(dir, "masks", "case1.nii"), func(b []byte) []byte {
				b[352] = 1 // voxel (0, 0, 0): background -> class 1
				return b
			})
		}, false, contents},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfg := tc.open(t, dir)
			before := mustOpen(t, cfg).Fingerprint()
			if before.Files == "" || before.Contents == "" || before.Contents == before.Files {
				t.Fatalf("fingerprint %+v: want Files and Contents", before)
			}
			if tc.old {
				before.Contents = ""
			}
			stored, err := json.Marshal(before)
			if err != nil {
				t.Fatal(err)
			}
			if tc.old && strings.Contains(string(stored), "contents") {
				t.Fatalf("old form %s holds contents", stored)
			}
			var ck Fingerprint
			if err := json.Unmarshal(stored, &ck); err != nil {
				t.Fatal(err)
			}
			tc.change(t, dir)
			diffs := ck.Diff(mustOpen(t, cfg).Fingerprint())
			switch {
			case tc.want == "" && len(diffs) > 0:
				t.Errorf("differences %q, want none", diffs)
			case tc.want != "" && !strings.Contains(strings.Join(diffs, "; "), tc.want):
				t.Errorf("differences %q, want %q", diffs, tc.want)
			}
		})
	}
}
