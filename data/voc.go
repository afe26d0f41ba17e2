package data

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/memunet/memunet/infile"
)

// vocLists are the split lists of a VOC root.
const (
	vocTrainList = "ImageSets/Segmentation/train.txt"
	vocValList   = "ImageSets/Segmentation/val.txt"
)

// listVOC reads a VOCdevkit-style root: the ids of
// ImageSets/Segmentation/train.txt and (if present) val.txt, each with
// JPEGImages/ID.jpg and SegmentationClass/ID.png. It returns the training
// pairs followed by the validation pairs, and how many are training pairs;
// hasVal says val.txt exists and lists at least one id.
func listVOC(root string) (pairs []pair, nTrain int, hasVal bool, probs []Problem) {
	layout := "data.source voc reads a VOC root such as VOCdevkit/VOC2012: JPEGImages/, SegmentationClass/ and ImageSets/Segmentation/{train,val}.txt"
	if p := checkDir(root, "set data.path to "+layout[len("data.source voc reads "):]); p != nil {
		return nil, 0, false, []Problem{*p}
	}
	for _, d := range []string{"JPEGImages", "SegmentationClass"} {
		if p := checkDir(filepath.Join(root, d), layout); p != nil {
			for _, sub := range []string{"VOC2012", "VOC2007"} {
				if st, err := os.Stat(filepath.Join(root, sub, d)); err == nil && st.IsDir() {
					p.Msg += fmt.Sprintf("; did you mean data.path: %s?", filepath.Join(root, sub))
					break
				}
			}
			probs = append(probs, *p)
		}
	}
	if len(probs) > 0 {
		return nil, 0, false, probs
	}
	trainIDs, p := readList(filepath.Join(root, vocTrainList), true)
	if p != nil {
		return nil, 0, false, []Problem{*p}
	}
	valIDs, p := readList(filepath.Join(root, vocValList), false)
	if p != nil {
		return nil, 0, false, []Problem{*p}
	}
	add := func(list string, ids []idLine) {
		for _, id := range ids {
			if !localID(id.id) {
				probs = append(probs, fatal(fmt.Sprintf("%s:%d", list, id.line),
					"id %q may read outside the VOC root %s: an id names JPEGImages/ID.jpg and SegmentationClass/ID.png under the root, so it must be a relative path without \"..\"; fix the list",
					id.id, root))
				continue
			}
			var img string
			var bad []Problem // symlink loops and broken links
			for _, ext := range []string{".jpg", ".jpeg", ".png", ".JPG", ".JPEG", ".PNG"} {
				c := filepath.Join(root, "JPEGImages", id.id+ext)
				ok, p := statFile(c)
				if p != nil {
					bad = append(bad, *p)
				}
				if ok && img == "" {
					img = c
				}
			}
			mask := filepath.Join(root, "SegmentationClass", id.id+".png")
			hasMask, p := statFile(mask)
			if p != nil {
				bad = append(bad, *p)
			}
			switch {
			case len(bad) > 0:
				probs = append(probs, bad...)
			case img == "":
				probs = append(probs, fatal(fmt.Sprintf("%s:%d", list, id.line), "id %q has no image: looked for %s", id.id, filepath.Join(root, "JPEGImages", id.id+".jpg")))
			case !hasMask:
				probs = append(probs, fatal(img, "has no mask: looked for %s (listed in %s line %d)", mask, list, id.line))
			default:
				pairs = append(pairs, pair{id: id.id, image: img, mask: mask})
			}
		}
	}
	add(filepath.Join(root, vocTrainList), trainIDs)
	nTrain = len(pairs)
	add(filepath.Join(root, vocValList), valIDs)
	if len(trainIDs) == 0 {
		probs = append(probs, fatal(filepath.Join(root, vocTrainList), "lists no ids: the dataset is empty"))
	}
	return pairs, nTrain, len(valIDs) > 0, probs
}

// localID reports whether a VOC list id names a path under the root: not
// absolute and without a ".." element (even one that would come back).
func localID(id string) bool {
	return filepath.IsLocal(id) && !slices.Contains(strings.Split(filepath.ToSlash(id), "/"), "..")
}

// maxListBytes bounds a VOC list of ids (VOC2012's are 70 KB).
const maxListBytes = 64 << 20

type idLine struct {
	id   string
	line int
}

// readList reads one id per line (the first word; blank lines skipped).
func readList(path string, required bool) ([]idLine, *Problem) {
	f, _, err := infile.Open(path, maxListBytes)
	if err != nil {
		if isLoop(err) {
			return nil, loopProblem(path)
		}
		if errors.Is(err, fs.ErrNotExist) && !required {
			return nil, nil
		}
		var refused *infile.Error
		if errors.As(err, &refused) {
			p := fatal(path, "%s (a list of ids, one a line)", refused.Reason)
			return nil, &p
		}
		p := fatal(path, "cannot read the list of ids: %v", unwrapPath(err))
		return nil, &p
	}
	defer f.Close()
	var ids []idLine
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if fields := strings.Fields(sc.Text()); len(fields) > 0 {
			ids = append(ids, idLine{fields[0], n})
		}
	}
	if err := sc.Err(); err != nil {
		p := fatal(path, "cannot read the list of ids: %v", err)
		return nil, &p
	}
	return ids, nil
}
